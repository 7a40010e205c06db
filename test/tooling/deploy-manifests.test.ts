import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { DEFAULT_HEALTH_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT } from "../../src/config.js";
import { DEFAULT_METRICS_PORT } from "../../src/metrics/port-settings.js";
import { resolveOptions } from "../../supervisor/options.js";
import { getStageEnv, readDockerfile, readDuration, type Stage } from "./dockerfile.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const K8S = join(ROOT, "docker/k8s");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
/** The supervisor SIGKILLs a worker still draining this long after its budget. */
const KILL_MARGIN = resolveOptions({ entry: "x", workers: 1 }).killMargin;
/** What a cluster scrape may wait for one worker (createPrometheus' clusterTimeoutMs default). */
const CLUSTER_SCRAPE_TIMEOUT = 2000;

type Labels = Record<string, string>;
interface Probe { httpGet?: { path: string; port: number | string }; periodSeconds?: number; timeoutSeconds?: number; failureThreshold?: number }
interface EnvVar {
  name: string; value?: string;
  valueFrom?: { resourceFieldRef?: { containerName?: string; resource: string; divisor?: string }; secretKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Container {
  name: string; image: string; env?: EnvVar[]; ports?: { name?: string; containerPort: number }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  startupProbe?: Probe; readinessProbe?: Probe; livenessProbe?: Probe;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  lifecycle?: { preStop?: unknown };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  terminationGracePeriodSeconds?: number; enableServiceLinks?: boolean; securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; containers: Container[];
  volumes?: { name: string; emptyDir?: { sizeLimit?: string } }[];
}
interface PolicyPort { port?: number | string; protocol?: string }
interface PolicyRule { from?: unknown[]; ports?: PolicyPort[] }
interface Manifest {
  apiVersion: string; kind: string; metadata: { name: string; labels?: Labels; annotations?: Labels };
  type?: string; stringData?: Record<string, string>;
  spec: {
    replicas?: number; selector: { matchLabels?: Labels } & Labels; template: { metadata: { labels: Labels; annotations?: Labels }; spec: PodSpec };
    strategy?: { rollingUpdate?: { maxUnavailable?: number | string } };
    scaleTargetRef: { apiVersion: string; kind: string; name: string }; minReplicas?: number; maxReplicas: number;
    minAvailable?: number | string; maxUnavailable?: number | string; ports: { port: number; targetPort: number | string }[];
    podSelector: { matchLabels?: Labels }; policyTypes?: string[]; ingress?: PolicyRule[];
  };
}

/** The applied manifests, or (`examples`) the `*.example.yaml` templates kept out of kustomization.yaml. */
function loadManifests(examples = false): { file: string; doc: Manifest }[] {
  const out: { file: string; doc: Manifest }[] = [];
  for (const file of readdirSync(K8S).filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml" && f.endsWith(".example.yaml") === examples)) {
    for (const doc of parseAllDocuments(readFileSync(join(K8S, file), "utf8"))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
      out.push({ file, doc: doc.toJS() as Manifest });
    }
  }
  return out;
}

const manifests = loadManifests();
const byKind = (kind: string) => {
  const found = manifests.filter((m) => m.doc.kind === kind);
  if (found.length !== 1) throw new Error(`expected one ${kind} in docker/k8s, found ${found.length}`);
  return (found[0] as { doc: Manifest }).doc;
};
const deployment = byKind("Deployment");
const pod = deployment.spec.template.spec;
const container = pod.containers[0] as Container;
const envOf = (c: Container) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
const env = envOf(container);
const envNumber = (name: string, fallback: number) => Number(env[name]?.value ?? fallback);
const subsetOf = (selector: Labels | undefined, labels: Labels) =>
  Object.keys(selector ?? {}).length > 0 && Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);

/** CPU quantity in cores ("2", "1500m"); memory in bytes ("512Mi", "1G"). */
function readQuantity(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  if (!m) throw new Error(`bad quantity ${q}`);
  const factor: Record<string, number> = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? (factor[m[2]] ?? NaN) : 1);
}

/** How long a probe must fail before it acts, in seconds (Kubernetes defaults: every 10 s, 3 failures). */
const failureWindow = (p: Probe | undefined) => (p?.periodSeconds ?? 10) * (p?.failureThreshold ?? 3);

/** A probe or Service port, named or numbered, as the container port number. */
function resolvePort(port: number | string | undefined): number | undefined {
  return typeof port === "number" ? port : container.ports?.find((p) => p.name === port)?.containerPort;
}

describe("docker/k8s", () => {
  it("parses, and kustomization.yaml lists every manifest", () => {
    const kustomization = parse(readFileSync(join(K8S, "kustomization.yaml"), "utf8")) as { resources: string[] };
    expect(kustomization.resources.toSorted()).toEqual([...new Set(manifests.map((m) => m.file))].toSorted());
    expect(manifests.map((m) => m.doc.kind).toSorted())
      .toEqual(["Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget", "Service"]);
  });

  it("labels and selectors agree: Deployment, Service and PodDisruptionBudget select the pod template", () => {
    const labels = deployment.spec.template.metadata.labels;
    expect(subsetOf(deployment.spec.selector.matchLabels, labels)).toBe(true);
    expect(subsetOf(byKind("Service").spec.selector as Labels, labels)).toBe(true);
    expect(subsetOf(byKind("PodDisruptionBudget").spec.selector.matchLabels, labels)).toBe(true);
  });

  it("the HPA targets the Deployment and leaves the PodDisruptionBudget room to evict", () => {
    const hpa = byKind("HorizontalPodAutoscaler");
    expect(hpa.apiVersion).toBe("autoscaling/v2");
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: deployment.metadata.name });
    // A fixed replica count would be reset on every apply, fighting the autoscaler.
    expect(deployment.spec.replicas).toBeUndefined();
    const min = hpa.spec.minReplicas ?? 1;
    expect(min).toBeGreaterThanOrEqual(2);
    expect(hpa.spec.maxReplicas).toBeGreaterThanOrEqual(min);
    const pdb = byKind("PodDisruptionBudget");
    expect(pdb.apiVersion).toBe("policy/v1");
    expect(Number(pdb.spec.minAvailable)).toBeLessThan(min);
    // The HPA's CPU utilisation is relative to the request: it must exist.
    expect(container.resources?.requests?.cpu).toBeDefined();
  });

  it("probes hit /health on the container port, with timeouts above the health checkers' own", () => {
    const port = Number(env.PORT?.value);
    expect(container.ports?.map((p) => p.containerPort)).toContain(port);
    for (const name of ["startupProbe", "readinessProbe", "livenessProbe"] as const) {
      const probe = container[name];
      expect(probe?.httpGet?.path, name).toBe("/health");
      expect(resolvePort(probe?.httpGet?.port), name).toBe(port);
      expect((probe?.timeoutSeconds ?? 1) * 1000, name).toBeGreaterThan(DEFAULT_HEALTH_TIMEOUT);
    }
    const { startupProbe: startup, livenessProbe: liveness, readinessProbe: readiness } = container;
    // Liveness never acts faster than readiness: a DOWN dependency should take the pod out of rotation first.
    expect(failureWindow(liveness)).toBeGreaterThan(failureWindow(readiness));
    expect(failureWindow(startup)).toBeGreaterThanOrEqual(30);
    const service = byKind("Service");
    expect(resolvePort(service.spec.ports[0]?.targetPort)).toBe(port);
  });

  it("the grace period covers the shutdown delay, the budget and the supervisor's kill margin", () => {
    const delay = envNumber("KEELSON_SHUTDOWN_DELAY_MS", 0);
    const budget = envNumber("KEELSON_SHUTDOWN_TIMEOUT_MS", DEFAULT_SHUTDOWN_TIMEOUT);
    const grace = (pod.terminationGracePeriodSeconds ?? 30) * 1000;
    expect(pod.terminationGracePeriodSeconds).toBeDefined();
    expect(grace).toBeGreaterThan(delay + budget);
    expect(grace).toBeGreaterThanOrEqual(budget + KILL_MARGIN + 2000);
    // Endpoints are removed before the listener closes: either the framework's delay or a preStop.
    expect(delay > 0 || container.lifecycle?.preStop !== undefined).toBe(true);
    // The delay is part of the budget: leave the drain and the hooks their 10 s.
    expect(budget - delay).toBeGreaterThanOrEqual(DEFAULT_SHUTDOWN_TIMEOUT);
  });

  it("readiness fails within the shutdown delay, so a balancer that follows only readiness stops sending first", async () => {
    const delay = envNumber("KEELSON_SHUTDOWN_DELAY_MS", 0);
    expect(failureWindow(container.readinessProbe) * 1000).toBeLessThan(delay);
    // The fleet scenario (make fleet, test/fleet.test.ts) runs with these very settings.
    const { FLEET_SETTINGS } = await import("../../load-tests/fleet/run.js");
    expect(FLEET_SETTINGS).toMatchObject({
      shutdownDelayMs: delay,
      shutdownTimeoutMs: envNumber("KEELSON_SHUTDOWN_TIMEOUT_MS", DEFAULT_SHUTDOWN_TIMEOUT),
      readinessPeriodSeconds: container.readinessProbe?.periodSeconds,
      readinessFailureThreshold: container.readinessProbe?.failureThreshold,
      readinessTimeoutSeconds: container.readinessProbe?.timeoutSeconds,
    });
  });

  it("runs as non-root with limits, and WORKERS follows the CPU limit", () => {
    const uid = container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser;
    expect(container.securityContext?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot).toBe(true);
    expect(uid).toBeGreaterThan(0);
    expect(container.securityContext?.allowPrivilegeEscalation).toBe(false);
    expect(container.securityContext?.capabilities?.drop).toContain("ALL");
    const { requests = {}, limits = {} } = container.resources ?? {};
    for (const resource of ["cpu", "memory"]) {
      expect(limits[resource], `limits.${resource}`).toBeDefined();
      expect(readQuantity(requests[resource] ?? "0"), `requests.${resource}`).toBeGreaterThan(0);
      expect(readQuantity(requests[resource] ?? "0")).toBeLessThanOrEqual(readQuantity(limits[resource] ?? "0"));
    }
    const workers = env.WORKERS;
    const ref = workers?.valueFrom?.resourceFieldRef;
    if (ref) {
      expect(ref.resource).toBe("limits.cpu");
      expect(ref.containerName ?? container.name).toBe(container.name);
      expect(readQuantity(ref.divisor ?? "1")).toBe(1);
    } else {
      expect(Number(workers?.value)).toBe(Math.ceil(readQuantity(limits.cpu ?? "0")));
    }
  });

  it("uses the image's compile cache as its user, and gives /tmp (control socket) a volume under the read-only root filesystem", () => {
    expect(container.securityContext?.readOnlyRootFilesystem).toBe(true);
    // The image ships V8's compile cache (NODE_COMPILE_CACHE in its ENV), made as the image's USER:
    // Node keys it by uid, so the pod runs as that uid and does not point the cache elsewhere.
    const image = readDockerfile(join(ROOT, "docker/Dockerfile")).stages.at(-1) as Stage;
    expect(getStageEnv(image).NODE_COMPILE_CACHE).toBeDefined();
    expect(env.NODE_COMPILE_CACHE).toBeUndefined();
    const imageUser = image.instructions.filter((i) => i.keyword === "USER").at(-1)?.args.split(":")[0];
    expect(String(container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser)).toBe(imageUser);
    // The supervisor's control socket goes under <os.tmpdir()>.
    const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
    expect(mount, "a volume mounted over /tmp").toBeDefined();
    expect(mount?.readOnly).not.toBe(true);
    expect(pod.volumes?.find((v) => v.name === mount?.name)?.emptyDir).toBeDefined();
  });

  it("takes DATABASE_URL and BOOKSTORE_JWT_SECRET from the Secret of secret.example.yaml, required, and never applies the example itself", () => {
    const ref = env.DATABASE_URL?.valueFrom?.secretKeyRef;
    const [secret, ...more] = loadManifests(true).filter((m) => m.doc.kind === "Secret");
    expect(more).toEqual([]);
    expect(secret?.file).toBe("secret.example.yaml");
    expect(ref).toEqual({ name: secret?.doc.metadata.name, key: "DATABASE_URL" });
    // Not optional: the HPA runs several pods, and without it each would keep its own SQLite catalogue.
    expect(ref?.optional ?? false).toBe(false);
    expect(new URL(secret?.doc.stringData?.DATABASE_URL ?? "").protocol).toBe("postgres:");
    // The token key too, required: no pod may fall back to the example's public development key.
    expect(env.BOOKSTORE_JWT_SECRET?.valueFrom?.secretKeyRef).toEqual({ name: secret?.doc.metadata.name, key: "BOOKSTORE_JWT_SECRET" });
    expect(secret?.doc.stringData?.BOOKSTORE_JWT_SECRET?.length).toBeGreaterThanOrEqual(32);
    const kustomization = parse(readFileSync(join(K8S, "kustomization.yaml"), "utf8")) as { resources: string[] };
    expect(kustomization.resources).not.toContain("secret.example.yaml");
  });

  it("runs the image `make docker` tags, and Prometheus scrapes the supervisor's metrics port, not the service port", () => {
    expect(container.image).toBe(`keelson-example:${pkg.version}`);
    const annotations = deployment.spec.template.metadata.annotations ?? {};
    expect(annotations["prometheus.io/scrape"]).toBe("true");
    const metricsPort = Number(env.KEELSON_METRICS_PORT?.value ?? DEFAULT_METRICS_PORT);
    expect(metricsPort).not.toBe(Number(env.PORT?.value));
    expect(Number(annotations["prometheus.io/port"])).toBe(metricsPort);
    expect(resolvePort("metrics")).toBe(metricsPort);
    expect(annotations["prometheus.io/path"]).toBe("/metrics");
    // Not behind the Service: nothing that reaches the API through it reaches the metrics.
    expect(byKind("Service").spec.ports.map((p) => resolvePort(p.targetPort))).not.toContain(metricsPort);
    expect(pod.enableServiceLinks).toBe(false);
    expect(deployment.spec.strategy?.rollingUpdate?.maxUnavailable).toBe(0);
  });
});

/** Whether a NetworkPolicy rule's ports let traffic to `port` through (no ports: every port). */
function opens(rule: PolicyRule, port: number): boolean {
  return rule.ports === undefined || rule.ports.some((p) => resolvePort(p.port) === port);
}

describe("docker/k8s/networkpolicy.yaml", () => {
  const policy = byKind("NetworkPolicy");
  const rules = policy.spec.ingress ?? [];
  const metricsPort = Number(env.KEELSON_METRICS_PORT?.value ?? DEFAULT_METRICS_PORT);

  it("selects the pods and restricts their ingress", () => {
    expect(policy.apiVersion).toBe("networking.k8s.io/v1");
    expect(subsetOf(policy.spec.podSelector.matchLabels, deployment.spec.template.metadata.labels)).toBe(true);
    expect(policy.spec.policyTypes).toContain("Ingress");
  });

  it("lets anyone reach the API port and only selected peers the metrics port", () => {
    expect(rules.some((rule) => opens(rule, Number(env.PORT?.value)) && rule.from === undefined)).toBe(true);
    const toMetrics = rules.filter((rule) => opens(rule, metricsPort));
    expect(toMetrics.length).toBeGreaterThan(0);
    for (const rule of toMetrics) expect(rule.from?.length, JSON.stringify(rule)).toBeGreaterThan(0);
  });
});

interface ComposeService {
  image?: string; build?: { context: string; dockerfile: string }; environment?: Record<string, string | number> | string[];
  ports?: string[]; stop_grace_period?: string; volumes?: string[]; command?: string[];
  depends_on?: Record<string, { condition: string }>; healthcheck?: { test: string[] };
}

/** Compose's `${VAR:-default}` with an empty environment: the defaults. */
const interpolate = (value: string) => value.replace(/\$\{(\w+)(?::?-([^}]*))?\}/g, (_, __, fallback: string | undefined) => fallback ?? "");

function serviceEnv(service: ComposeService): Record<string, string> {
  const raw = service.environment ?? {};
  const entries = Array.isArray(raw) ? raw.map((line) => line.split(/=(.*)/s).slice(0, 2)) : Object.entries(raw);
  return Object.fromEntries(entries.map(([k, v]) => [k, interpolate(String(v ?? ""))]));
}

describe("docker/compose.yaml", () => {
  const compose = parse(readFileSync(join(ROOT, "docker/compose.yaml"), "utf8")) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
  const services = compose.services;
  const [appName, app] = Object.entries(services).find(([, s]) => s.build) ?? [];
  const appEnv = serviceEnv(app ?? {});
  const runtime = readDockerfile(join(ROOT, "docker/Dockerfile")).stages.at(-1) as Stage;

  it("builds the service from docker/Dockerfile with the repository root as context", () => {
    expect(app?.build).toEqual({ context: "..", dockerfile: "docker/Dockerfile" });
    const port = appEnv.PORT ?? getStageEnv(runtime).PORT;
    expect(app?.ports?.map((p) => p.split(":").at(-1))).toContain(port);
    expect(Number(appEnv.WORKERS)).toBeGreaterThanOrEqual(1);
  });

  it("gives the stop the time the shutdown needs (Compose's default is 10 s)", () => {
    const budget = Number(appEnv.KEELSON_SHUTDOWN_TIMEOUT_MS ?? DEFAULT_SHUTDOWN_TIMEOUT);
    const delay = Number(appEnv.KEELSON_SHUTDOWN_DELAY_MS ?? 0);
    expect(readDuration(app?.stop_grace_period ?? "10s")).toBeGreaterThanOrEqual(delay + budget + KILL_MARGIN + 2000);
  });

  it("sends OTLP to the trace backend, pins every third-party image, and Prometheus scrapes the service", () => {
    const otlp = new URL(appEnv.OTEL_EXPORTER_OTLP_ENDPOINT ?? "");
    const backend = services[otlp.hostname];
    expect(backend, `service ${otlp.hostname}`).toBeDefined();
    expect(otlp.port).toBe("4318");
    expect(backend?.image).toMatch(/^jaegertracing\/jaeger:\d+\.\d+\.\d+$/);
    for (const [name, service] of Object.entries(services).filter(([, s]) => !s.build)) {
      // PostgreSQL's full version has two parts (17.6): no patch number exists to pin.
      expect(service.image, name).toMatch(service.image?.startsWith("postgres:") ? /^postgres:\d+\.\d+$/ : /^[\w./-]+:v?\d+\.\d+\.\d+$/);
    }

    const [prometheusName] = Object.entries(services).find(([, s]) => s.image?.startsWith("prom/prometheus:")) ?? [];
    const mount = services[prometheusName ?? ""]?.volumes?.find((v) => v.includes("prometheus.yml"))?.split(":")[0] ?? "";
    const config = parse(readFileSync(join(ROOT, "docker", mount), "utf8")) as {
      global?: { scrape_timeout?: string };
      scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[];
    };
    const metricsPort = appEnv.KEELSON_METRICS_PORT ?? String(DEFAULT_METRICS_PORT);
    expect(metricsPort).not.toBe(appEnv.PORT);
    const job = config.scrape_configs.find((j) => j.static_configs.some((s) => s.targets.includes(`${appName ?? ""}:${metricsPort}`)));
    expect(job, "a job scraping the service's metrics port").toBeDefined();
    // Prometheus reaches it on the compose network; the host gets the API only.
    expect(app?.ports?.map((p) => p.split(":").at(-1))).not.toContain(metricsPort);
    expect(job?.metrics_path ?? "/metrics").toBe("/metrics");
    expect(readDuration(config.global?.scrape_timeout ?? "10s")).toBeGreaterThan(CLUSTER_SCRAPE_TIMEOUT);
  });

  it("keeps the catalogue in a PostgreSQL service: healthy before the app starts, its data on a named volume", () => {
    const url = new URL(appEnv.DATABASE_URL ?? "");
    expect(url.protocol).toBe("postgres:");
    const db = services[url.hostname];
    expect(db?.image, `service ${url.hostname}`).toMatch(/^postgres:/);
    expect(app?.depends_on?.[url.hostname]).toEqual({ condition: "service_healthy" });
    expect(db?.healthcheck?.test.join(" ")).toMatch(/pg_isready/);
    const dbEnv = serviceEnv(db ?? {});
    expect([dbEnv.POSTGRES_USER, dbEnv.POSTGRES_PASSWORD, dbEnv.POSTGRES_DB]).toEqual([url.username, url.password, url.pathname.slice(1)]);
    const [volume, target] = db?.volumes?.find((v) => v.endsWith(":/var/lib/postgresql/data"))?.split(":") ?? [];
    expect(compose.volumes ?? {}).toHaveProperty(volume ?? "(no volume)");
    expect(target).toBe("/var/lib/postgresql/data");
  });
});
