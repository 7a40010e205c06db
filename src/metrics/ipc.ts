import { defineIpcMessage, defineIpcRequest } from "../cluster/ipc.js";

/**
 * The metrics integration's IPC message types, registered with the core protocol: the primary
 * (metrics/primary.ts) and the worker (prometheus.ts) both import them from here. This file
 * and everything it imports stay free of prom-client, so the primary never loads it.
 */

/** prom-client's `getMetricsAsJSON()` output, as sent over IPC. */
export type MetricsSnapshot = ReadonlyArray<Record<string, unknown>>;

/**
 * Worker → primary, once per worker as the metrics module registers: this App has metrics, so
 * the primary opens its metrics port; `timeoutMs` is how long to wait for each worker's snapshot.
 */
export const metricsHello = defineIpcMessage<{ pid: number; timeoutMs: number }>("metrics:hello");

/** Worker → primary: the cluster-wide exposition for a scrape on the App's port; `timeoutMs` is per worker. */
export const metricsCluster = defineIpcRequest<{ timeoutMs: number }, { text: string; contentType: string }>("metrics:cluster");

/** Primary → worker: this worker's metrics snapshot. */
export const metricsSnapshot = defineIpcRequest<Record<string, never>, { snapshot: MetricsSnapshot }>("metrics:snapshot");

/** Worker → primary, after its drain: its last snapshot, kept by the primary once it has exited. */
export const metricsFinal = defineIpcRequest<{ pid: number; snapshot: MetricsSnapshot }, Record<string, never>>("metrics:final");
