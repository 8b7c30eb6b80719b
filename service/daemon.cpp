// placeholder replaced by the daemon implementation
namespace ringsync::service {}
