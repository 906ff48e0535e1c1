#!/usr/bin/env node
// validate.mjs FILE... ("-" reads stdin): checks Kubernetes manifests offline, as far
// as a cluster would before running them; no cluster is reachable in our tests.
//  - built-in kinds (core, apps, storage, batch, ...): the kubernetes-models class for
//    the document's apiVersion and kind; its validate() is compiled from the
//    Kubernetes OpenAPI. That schema does not reject unknown fields.
//  - kubeflow.org/v2beta1 MPIJob: the openAPIV3Schema of the MPI Operator's CRD
//    ($TENCACHE_MPIJOB_CRD, default <repo>/../shared/k8s/kubeflow.org_mpijobs.yaml),
//    unknown fields rejected as `kubectl apply` (strict field validation) does. When
//    the file is absent only this check is skipped, and stderr says so.
//  - every metadata.name, namespace and label, by the API server's rules (and the MPI
//    Operator's for the pod hostnames it derives from an MPIJob's name).
// Exit 0: every document valid. 1: an invalid document or unreadable input; each
// error names the file, document index, kind, name and JSON path. 2: usage.
import { readFileSync, existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import { parseAllDocuments } from "yaml";
import { ObjectMeta } from "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CRD_PATH = process.env.TENCACHE_MPIJOB_CRD || resolve(REPO, "../shared/k8s/kubeflow.org_mpijobs.yaml");

// ---- names and labels (k8s.io/apimachinery/pkg/util/validation) ----
const LABEL_1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const isLabel1123 = (s) => s.length <= 63 && LABEL_1123.test(s);
const isLabel1035 = (s) => s.length <= 63 && LABEL_1035.test(s);
const isSubdomain = (s) => s.length <= 253 && s.split(".").every((p) => LABEL_1123.test(p));
const RULES = {
  label: "an RFC 1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit",
  subdomain: "an RFC 1123 subdomain: at most 253 characters, dot-separated RFC 1123 labels (lower case)",
  dns1035: "an RFC 1035 label: at most 63 lower-case letters, digits and '-', starting with a letter",
};
const pointer = (parts) => parts.map((p) => "/" + String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("");

function labelKeyProblem(key) {
  const slash = key.lastIndexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : null;
  const name = key.slice(slash + 1);
  if (prefix !== null && !isSubdomain(prefix)) return `label key prefix '${prefix}' must be ${RULES.subdomain}`;
  if (name.length > 63 || !QUALIFIED.test(name)) {
    return `label key '${key}': the name part must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`;
  }
  return null;
}

function labelValueProblem(value) {
  if (typeof value !== "string") return "label value must be a string (quote numbers and booleans)";
  if (value.length > 63) return `label value '${value}' is ${value.length} characters; at most 63`;
  if (value !== "" && !QUALIFIED.test(value)) {
    return `label value '${value}' must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit`;
  }
  return null;
}

// Labels of every metadata in the document, the pod templates' included.
function checkLabels(node, path, report) {
  if (Array.isArray(node)) return node.forEach((v, i) => checkLabels(v, [...path, i], report));
  if (!node || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if (key === "metadata" && value && typeof value === "object" && value.labels && typeof value.labels === "object") {
      for (const [k, v] of Object.entries(value.labels)) {
        const at = pointer([...path, "metadata", "labels", k]);
        const problem = labelKeyProblem(k) || labelValueProblem(v);
        if (problem) report(at, problem);
      }
    }
    checkLabels(value, [...path, key], report);
  }
}

function checkNames(doc, report) {
  const meta = doc.metadata;
  if (!meta || typeof meta !== "object") return report("/metadata", "metadata is required");
  if (meta.namespace !== undefined && !(typeof meta.namespace === "string" && isLabel1123(meta.namespace))) {
    report("/metadata/namespace", `'${meta.namespace}' must be ${RULES.label}`);
  }
  const name = meta.name;
  if (name === undefined) return meta.generateName ? null : report("/metadata/name", "metadata.name is required");
  if (typeof name !== "string") return report("/metadata/name", "must be a string");
  if (doc.kind === "Namespace" && !isLabel1123(name)) return report("/metadata/name", `'${name}' must be ${RULES.label}`);
  if (doc.kind === "Service" && !isLabel1035(name)) return report("/metadata/name", `'${name}' must be ${RULES.dns1035}`);
  if (!isSubdomain(name)) return report("/metadata/name", `'${name}' must be ${RULES.subdomain}`);
  if (doc.kind === "MPIJob") {
    // The operator names pods NAME-launcher and NAME-worker-I, with those hostnames, and
    // rejects a job whose last worker's name is not an RFC 1035 label (its validation.go).
    const workers = doc.spec?.mpiReplicaSpecs?.Worker?.replicas;
    const last = `${name}-worker-${Number.isInteger(workers) && workers > 0 ? workers - 1 : 0}`;
    if (!isLabel1035(last)) report("/metadata/name", `'${name}' gives the worker pod name '${last}', which must be ${RULES.dns1035}`);
    if (!isLabel1123(`${name}-launcher`)) report("/metadata/name", `'${name}-launcher' (the launcher pod) must be ${RULES.label}`);
  }
}

// ---- schemas ----
function ajvMessage(e) {
  if (e.keyword === "additionalProperties") return `unknown field '${e.params.additionalProperty}'`;
  if (e.keyword === "enum") return `${e.message}: ${e.params.allowedValues.join(", ")}`;
  return e.message;
}

// kubectl's strict field validation: an object schema with properties admits no others,
// unless it says so. Walks only schema keywords, so a field named "properties" is safe.
function rejectUnknownFields(s) {
  if (!s || typeof s !== "object") return;
  if (s.properties && s.additionalProperties === undefined && !s["x-kubernetes-preserve-unknown-fields"]) {
    s.additionalProperties = false;
  }
  for (const sub of Object.values(s.properties || {})) rejectUnknownFields(sub);
  for (const k of ["additionalProperties", "items", "not"]) rejectUnknownFields(s[k]);
  for (const k of ["allOf", "anyOf", "oneOf"]) (s[k] || []).forEach(rejectUnknownFields);
}

function loadMpiJobSchema() {
  if (!existsSync(CRD_PATH)) {
    console.error(`MPIJob schema check skipped: ${CRD_PATH} not found (set TENCACHE_MPIJOB_CRD to the MPI Operator's CRD file)`);
    return null;
  }
  const crd = parseAllDocuments(readFileSync(CRD_PATH, "utf8")).map((d) => d.toJS()).find((d) => d?.kind === "CustomResourceDefinition");
  const schema = crd?.spec?.versions?.find((v) => v.name === "v2beta1")?.schema?.openAPIV3Schema;
  if (!schema) throw new Error(`${CRD_PATH}: no v2beta1 openAPIV3Schema in a CustomResourceDefinition`);
  rejectUnknownFields(schema);
  // strict: false lets the x-kubernetes-* annotations through; their meaning that matters
  // here (int-or-string) is spelled out by the anyOf beside them.
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat("int64", { type: "number", validate: (n) => Number.isInteger(n) });
  return ajv.compile(schema);
}

let mpiJobValidator;  // undefined: not loaded yet; null: CRD absent
const modelCache = new Map();

// The kubernetes-models class for apiVersion/kind, or null when it has none.
async function modelClass(apiVersion, kind) {
  const key = `${apiVersion} ${kind}`;
  if (!modelCache.has(key)) {
    let cls = null;
    if (/^([a-z0-9.-]+\/)?v[0-9]+[a-z0-9]*$/.test(apiVersion) && /^[A-Z][A-Za-z0-9]*$/.test(kind)) {
      try {
        const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
        const c = mod[kind];
        if (c && c.apiVersion === apiVersion && c.kind === kind) cls = c;
      } catch {
        cls = null;  // no such module: not a kind kubernetes-models knows
      }
    }
    modelCache.set(key, cls);
  }
  return modelCache.get(key);
}

async function checkSchema(doc, report) {
  const { apiVersion, kind } = doc;
  if (typeof apiVersion !== "string" || typeof kind !== "string") return report("/", "apiVersion and kind are required");
  if (apiVersion === "kubeflow.org/v2beta1" && kind === "MPIJob") {
    if (mpiJobValidator === undefined) mpiJobValidator = loadMpiJobSchema();
    const meta = new ObjectMeta(doc.metadata);
    try {
      meta.validate();
    } catch (e) {
      for (const err of e.errors || [{ instancePath: "", message: e.message }]) report("/metadata" + err.instancePath, ajvMessage(err));
    }
    if (mpiJobValidator && !mpiJobValidator(doc)) {
      for (const err of mpiJobValidator.errors) report(err.instancePath || "/", ajvMessage(err));
    }
    return;
  }
  const Model = await modelClass(apiVersion, kind);
  if (!Model) {
    return report("/kind", `unknown kind '${kind}' in apiVersion '${apiVersion}': not a Kubernetes kind known to kubernetes-models, nor kubeflow.org/v2beta1 MPIJob`);
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    for (const err of e.errors || [{ instancePath: "", message: e.message }]) report(err.instancePath || "/", ajvMessage(err));
  }
}

// ---- input ----
function readInput(file) {
  return file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
}

async function validateFile(file, problems) {
  let text;
  try {
    text = readInput(file);
  } catch (e) {
    problems.push(`${file}: cannot read: ${e.message}`);
    return 0;
  }
  // YAML 1.1, as Kubernetes' own parser reads it: an unquoted `on` or `yes` is a
  // boolean there, and must fail where a string is expected.
  const docs = parseAllDocuments(text, { version: "1.1" });
  let count = 0;
  for (const [i, d] of docs.entries()) {
    const where = `${file === "-" ? "<stdin>" : file}: document ${i + 1}`;
    if (d.errors.length) {
      for (const e of d.errors) problems.push(`${where}: YAML: ${e.message.split("\n")[0]}`);
      continue;
    }
    const doc = d.toJS();
    if (doc === null || doc === undefined) continue;  // an empty document between separators
    count++;
    if (typeof doc !== "object" || Array.isArray(doc)) {
      problems.push(`${where}: /: must be a mapping (a Kubernetes object)`);
      continue;
    }
    const label = `${doc.kind ?? "<no kind>"} ${doc.metadata?.name ?? "<no name>"}`;
    const report = (path, message) => problems.push(`${where} (${label}): ${path}: ${message}`);
    await checkSchema(doc, report);
    checkNames(doc, report);
    checkLabels(doc, [], report);
  }
  return count;
}

async function main(files) {
  if (files.length === 0 || files.includes("--help") || files.includes("-h")) {
    console.error("usage: node tests/k8s/validate.mjs FILE... ('-' reads stdin)\n" +
                  "  exit 0 all valid, 1 invalid or unreadable, 2 usage; env TENCACHE_MPIJOB_CRD: the MPIJob CRD");
    return 2;
  }
  const problems = [];
  let documents = 0;
  for (const f of files) documents += await validateFile(f, problems);
  if (problems.length) {
    for (const p of problems) console.log(p);
    console.log(`validate: ${problems.length} problem(s) in ${documents} document(s)`);
    return 1;
  }
  console.log(`validate: ${documents} document(s) valid`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
