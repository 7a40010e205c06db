/**
 * Whether a process of this machine runs under `pid`: signal 0 asks without sending anything, and
 * EPERM means it runs, as another user. Read by the upload-folder sweep (folders of processes
 * gone) and the supervisors' registry (records of supervisors gone).
 *
 * @example
 * if (!processRuns(record.pid)) removeRecord(record);
 */
export function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
