import type { ServiceSettings } from "../src/cluster/feature-host.js";
import { metricsPortFeature } from "../src/metrics/port-settings.js";

/**
 * The options, `keelson start` flags and `keelson status` lines of the cluster features that
 * have some (FEATURES installs their primary sides). Apart from features.ts because the CLI reads
 * this before it forks the workers, and must not load the features' primary sides for it. A
 * feature with options adds its FeatureSettings here: options.ts, cli/args.ts and
 * cli/control-command.ts read them from this list.
 */
export const FEATURE_SETTINGS = [metricsPortFeature] as const;

type Feature = (typeof FEATURE_SETTINGS)[number];
/** All of the union's members at once: each feature adds its own options. */
type Each<U> = (U extends unknown ? (each: U) => void : never) extends (all: infer I) => void ? I : never;

/** The options the features of FEATURE_SETTINGS add to SupervisorOptions. */
export type FeatureOptions = Each<Parameters<Feature["resolve"]>[0]>;

/** What they add to ResolvedSupervisorOptions. */
export type ResolvedFeatureOptions = Each<ReturnType<Feature["resolve"]>>;

/** Every feature's options with their defaults, checked, for resolveOptions; `service`: what it resolved of the service's own. */
export function resolveFeatureOptions(options: FeatureOptions, env: NodeJS.ProcessEnv, service: ServiceSettings): ResolvedFeatureOptions {
  return Object.assign({}, ...FEATURE_SETTINGS.map((feature) => feature.resolve(options, env, service))) as ResolvedFeatureOptions;
}

/** Every feature's options as `keelson start` was given them (flags by name, else variables). */
export function featureOptionsFromCli(values: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv): FeatureOptions {
  return Object.assign({}, ...FEATURE_SETTINGS.map((feature) => feature.fromCli(values, env))) as FeatureOptions;
}
