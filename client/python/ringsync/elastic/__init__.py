"""ringsync.elastic: training that survives the loss of a rank or a node.

    import ringsync, ringsync.elastic as elastic

    state = elastic.TorchState(model, optimizer, step=0)   # or elastic.ObjectState(step=0, ...)

    @elastic.run
    def train(state):
      while state.step < steps:
        ...one step: forward, backward, allreduce, optimizer.step()...
        state.step += 1
        state.commit()          # a copy in this process's memory and in its ringsyncd's

    ringsync.init()
    train(state)

A State is committed at the end of every step: a copy in memory (cheap: no disk write) and,
by default, a copy the node's ringsyncd keeps for this rank (it outlives the trainer, so a
trainer restarted on the same node resumes from it instead of a disk checkpoint). When a
collective fails because a rank or node of the job was lost, @run puts every surviving rank's
state back to its last commit, connects again (the daemons form the job's next ring), makes
every rank's state the newest commit any rank holds (sync()) and calls the function again.
See docs/elastic.md for the guarantees and the membership rules.
"""

from ._run import MembershipChange, is_membership_error, run
from ._state import ObjectState, State, TorchState

__all__ = ["State", "ObjectState", "TorchState", "run", "is_membership_error", "MembershipChange"]
