import type { ConsolaInstance } from "consola";

let instance: Promise<ConsolaInstance> | undefined;

/**
 * consola for the commands a person types (`status`, `reload`, `dev`); their output is their
 * purpose, so it is never hidden (consola's default is silent under NODE_ENV=test). Loaded on
 * first use: `keelson start` prints no human output, and loading consola would lengthen its start-up.
 *
 * @example
 * (await terminal()).success("reload complete");
 */
export function terminal(): Promise<ConsolaInstance> {
  return (instance ??= import("consola").then(({ createConsola }) => createConsola({ level: 3 })));
}
