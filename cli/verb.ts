// What a verb of the `keelson` command is, apart from the table (verbs.ts) that lists them: the
// verbs' modules import these types, and the table imports the modules.

/** What every verb's runner is given besides its arguments. */
export interface VerbContext {
  env: NodeJS.ProcessEnv;
  /** Warnings of the runtime's set-up (cli/runtime.ts), for a supervisor's log once it has one. */
  warnings: readonly string[];
}

/** A verb's module, loaded only when that verb runs or its usage is asked for. */
export interface VerbModule {
  /** `keelson <verb> --help`: this verb's usage alone. */
  usage: string;
  /**
   * Runs the verb with the arguments after it; resolves to the exit code, or to undefined when it
   * keeps running (a supervisor, `status --watch`) and sets `process.exitCode` itself when it ends.
   */
  run(argv: readonly string[], context: VerbContext): Promise<number | undefined>;
}
