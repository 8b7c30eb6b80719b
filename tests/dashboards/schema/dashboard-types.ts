// The type every dashboard in dashboards/grafana must satisfy: Grafana's own
// dashboard model from @grafana/schema (`Dashboard`, `Panel`, `VariableModel`,
// the panel plugins' `Options` and `FieldConfig`), narrowed where Grafana's
// types are open-ended so that a misspelt or mistyped key fails:
//   - a panel's `options` and `fieldConfig.defaults.custom` are the types of
//     its plugin (timeseries, stat, table, heatmap, bargauge), chosen by `type`;
//   - an override's value has the type of the option its id names, and a
//     transformation's options those of its transformer;
//   - a target is a Prometheus query (`expr`, `legendFormat`, ...), not any
//     record; every panel and query reads the `${datasource}` variable;
//   - a single-valued variable's current option is a string, not a list;
//   - `id`, `title`, `description`, `gridPos` and `fieldConfig.defaults.unit`
//     are required.
// A panel type not listed in RingsyncPanel fails: add its plugin's types here.
// Only what @grafana/schema does not have is written out here: the Prometheus
// query and annotation fields (Grafana's Prometheus plugin defines them) and
// the options of the two transformations used (Grafana's @grafana/data).
import type {
  AnnotationQuery,
  Dashboard,
  DataQuery,
  DataTransformerConfig,
  FieldConfig,
  FieldConfigSource,
  GridPos,
  MatcherConfig,
  Panel,
  VariableModel,
  VariableOption,
} from '@grafana/schema';
import type * as bargauge from '@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen';
import type * as heatmap from '@grafana/schema/dist/esm/raw/composable/heatmap/panelcfg/x/HeatmapPanelCfg_types.gen';
import type * as stat from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type * as table from '@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen';
import type * as timeseries from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';

/**
 * The JSON form of a type. A JSON file cannot name an enum member
 * (`ThresholdsMode.Absolute`), only its value ("absolute"), so every string
 * enum becomes the union of its values; everything else is unchanged.
 */
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

/** Every panel, query and annotation reads the dashboard's datasource variable. */
export interface PrometheusRef {
  type: 'prometheus';
  uid: '${datasource}';
}

/** A Prometheus query, as Grafana's Prometheus plugin stores it (PromQuery). */
export interface PromQuery extends Omit<DataQuery, 'datasource'> {
  datasource?: PrometheusRef;
  expr: string;
  legendFormat?: string;
  instant?: boolean;
  range?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
  interval?: string;
  exemplar?: boolean;
  editorMode?: 'code' | 'builder';
}

/** Field defaults with the plugin's own custom config, and a unit always. */
type Defaults<Custom> = Omit<FieldConfig, 'custom' | 'unit'> & {
  unit: string;
  custom?: Custom;
};

/**
 * An override property. Grafana types its value `unknown`; here the value has
 * the type of the field option its id names: "unit" a string, "color" a
 * FieldColor, "custom.lineStyle" the plugin's LineStyle, and so on.
 */
type OverrideProperty<Custom> =
  | { [K in keyof Omit<FieldConfig, 'custom'> & string]-?: { id: K; value: Exclude<FieldConfig[K], undefined> } }[keyof Omit<FieldConfig, 'custom'> & string]
  | ([Custom] extends [never]
    ? never
    : { [K in keyof Custom & string]-?: { id: `custom.${K}`; value: Exclude<Custom[K], undefined> } }[keyof Custom & string]);

/** Overrides select fields by name, regular expression, query (refId) or type. */
interface Override<Custom> {
  matcher: Omit<MatcherConfig, 'id' | 'options'> & {
    id: 'byName' | 'byRegexp' | 'byFrameRefID' | 'byType';
    options: string;
  };
  properties: Array<OverrideProperty<Custom>>;
}

/**
 * The transformations these dashboards use, with their options as Grafana's
 * transformers read them (@grafana/data; @grafana/schema types them unknown).
 */
type Transformation =
  | (Omit<DataTransformerConfig, 'id' | 'options'> & {
    id: 'organize';
    options: {
      excludeByName: Record<string, boolean>;
      indexByName: Record<string, number>;
      renameByName: Record<string, string>;
      includeByName: Record<string, boolean>;
    };
  })
  | (Omit<DataTransformerConfig, 'id' | 'options'> & { id: 'merge'; options: Record<string, never> });

type PanelOf<Type extends string, Options, Custom> = Omit<
  Panel,
  'type' | 'options' | 'fieldConfig' | 'targets' | 'datasource' | 'id' | 'title' | 'description' | 'gridPos' | 'transformations'
> & {
  type: Type;
  id: number;
  title: string;
  description: string;
  gridPos: GridPos;
  datasource: PrometheusRef;
  targets: PromQuery[];
  options: Options;
  fieldConfig: Omit<FieldConfigSource, 'defaults' | 'overrides'> & {
    defaults: Defaults<Custom>;
    overrides: Array<Override<Custom>>;
  };
  transformations?: Transformation[];
};

export type RingsyncPanel =
  | PanelOf<'timeseries', timeseries.Options, timeseries.FieldConfig>
  | PanelOf<'stat', stat.Options, never>
  | PanelOf<'table', table.Options, table.FieldConfig>
  | PanelOf<'heatmap', heatmap.Options, heatmap.FieldConfig>
  | PanelOf<'bargauge', bargauge.Options, never>;

/**
 * A variable. One that cannot hold several values (multi false or absent)
 * has a single text and value, where Grafana's VariableOption allows lists.
 */
export type RingsyncVariable =
  | (Omit<VariableModel, 'multi' | 'current'> & {
    multi?: false;
    current?: Omit<VariableOption, 'text' | 'value'> & { text: string; value: string };
  })
  | (Omit<VariableModel, 'multi'> & { multi: true });

/** A Prometheus annotation: the query in `target`, the event's text from labels. */
export type PromAnnotation = Omit<AnnotationQuery<PromQuery>, 'datasource'> & {
  datasource: PrometheusRef;
  target: PromQuery;
  titleFormat?: string;
  textFormat?: string;
  tagKeys?: string;
  useValueForTime?: boolean;
};

export type RingsyncDashboard = Omit<
  Dashboard,
  'uid' | 'title' | 'description' | 'panels' | 'templating' | 'annotations'
> & {
  uid: string;
  title: string;
  description: string;
  panels: RingsyncPanel[];
  templating: { list: RingsyncVariable[] };
  annotations: { list: PromAnnotation[] };
};

/** What a dashboard file is checked against. */
export type RingsyncDashboardJson = Json<RingsyncDashboard>;

/** One panel of it (the checker's own tests check panels one by one). */
export type RingsyncPanelJson = Json<RingsyncPanel>;
