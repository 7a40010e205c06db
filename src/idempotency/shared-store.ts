import type { IdempotencyState, StoredResponse } from "./store.js";

/**
 * What the SQL and Redis stores share: one claim's record as text, and the state it answers.
 * Both keep the same fields, so a record means the same thing in either.
 */
export interface ClaimRecord {
  token: string;
  fingerprint: string;
  /** The kept response once the claim completed; absent while it runs. */
  response?: StoredResponse;
}

/** The state `begin` answers for a record that holds the key. */
export function stateOf(record: ClaimRecord): IdempotencyState {
  return record.response === undefined
    ? { state: "running", fingerprint: record.fingerprint }
    : { state: "done", fingerprint: record.fingerprint, response: record.response };
}

/** A response as one column or value: headers and the omitted flag travel with the body. */
export function responseText(response: StoredResponse): string {
  return JSON.stringify(response);
}

export function responseOf(text: string): StoredResponse {
  return JSON.parse(text) as StoredResponse;
}
