#!/usr/bin/env node
// Validates Kubernetes objects against the API's schemas, as a server with
// strict field validation (kubectl's default since 1.25) would: every
// object's kind must be known, every field typed as the schema says, and a
// field the schema does not know is an error, never dropped.
//
//   validate_objects.js <node_modules> <objects.json>
//
// <objects.json> holds a JSON array of objects (kustomize_build.py's
// output). The schemas are kubernetes-models' (npm; the version pinned in
// deploy/k8s_check/package-lock.json), installed by tools/setup.sh into
// <node_modules>. Exits 0 when every object is valid, 1 naming every
// problem otherwise, 2 on bad usage.
//
// kubernetes-models' validators ignore fields they do not know (their
// schemas leave additionalProperties open). They read every field they do
// know, though, present or not, and descend into each present one; so each
// object is validated through a proxy that records which fields were read,
// and a field nobody read is unknown. A schema that accepts any content
// (none of the manifests' objects has one) would have its content reported
// as unknown: a false alarm, never a silent pass.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

function usage() {
  process.stderr.write("usage: validate_objects.js <node_modules> <objects.json>\n");
  process.exit(2);
}

// The model class of apiVersion/kind, or null when kubernetes-models has
// none: "batch/v1" + "Job" -> kubernetes-models/batch/v1/Job.
function modelFor(requireFromModules, apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" ||
      !/^([a-z0-9-]+(\.[a-z0-9-]+)*\/)?v[0-9a-z]+$/.test(apiVersion) ||
      !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  try {
    const module = requireFromModules(`kubernetes-models/${apiVersion}/${kind}`);
    return typeof module[kind] === "function" ? module[kind] : null;
  } catch (e) {
    if (e.code === "MODULE_NOT_FOUND" || e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED") {
      return null;
    }
    throw e;
  }
}

// A view of `value` that records, for it and everything under it, which
// fields are read. `objects` collects {path, keys, read} per object.
function tracked(value, where, objects) {
  if (value === null || typeof value !== "object") return value;
  const read = new Set();
  objects.push({ where, keys: Array.isArray(value) ? [] : Object.keys(value), read });
  const children = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      const child = Reflect.get(target, key, receiver);
      if (typeof key !== "string") return child;
      read.add(key);
      if (child === null || typeof child !== "object") return child;
      if (!children.has(key)) {
        children.set(key, tracked(child, `${where}/${key}`, objects));
      }
      return children.get(key);
    },
    has(target, key) {
      if (typeof key === "string") read.add(key);
      return Reflect.has(target, key);
    },
  });
}

// The problems of one object, as strings.
function problems(requireFromModules, object) {
  if (object === null || typeof object !== "object" || Array.isArray(object)) {
    return ["not an object"];
  }
  const Model = modelFor(requireFromModules, object.apiVersion, object.kind);
  if (Model === null) {
    return [`no Kubernetes schema for apiVersion ${JSON.stringify(object.apiVersion)} ` +
            `kind ${JSON.stringify(object.kind)}`];
  }
  const out = [];
  const objects = [];
  try {
    // The model's own validate(), run on the tracked view rather than on a
    // copy (the constructor would read every field while copying it).
    Model.prototype.validate.call(tracked(object, "", objects));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    out.push(e.message);
  }
  for (const { where, keys, read } of objects) {
    for (const key of keys) {
      if (!read.has(key)) out.push(`unknown field ${where}/${key}`);
    }
  }
  return out;
}

function main(argv) {
  if (argv.length !== 2) usage();
  const [modules, objectsFile] = argv;
  const requireFromModules = createRequire(path.join(path.resolve(modules), "_"));
  let version;
  try {
    version = requireFromModules("kubernetes-models/package.json").version;
  } catch (e) {
    process.stderr.write(`validate_objects: kubernetes-models is not installed in ${modules} ` +
                         `(${e.code || e.message}); run tools/setup.sh\n`);
    return 1;
  }
  const objects = JSON.parse(fs.readFileSync(objectsFile, "utf8"));
  if (!Array.isArray(objects)) {
    process.stderr.write(`validate_objects: ${objectsFile} is not a JSON array\n`);
    return 2;
  }
  let failed = 0;
  objects.forEach((object, i) => {
    const name = object && object.metadata && object.metadata.name;
    const label = `${object && object.kind} ${name || `#${i}`}`;
    for (const problem of problems(requireFromModules, object)) {
      process.stdout.write(`validate_objects: ${label}: ${problem}\n`);
      failed++;
    }
  });
  if (failed > 0) {
    process.stdout.write(`validate_objects: ${failed} problem(s) in ${objectsFile}\n`);
    return 1;
  }
  process.stdout.write(`validate_objects: ${objects.length} objects valid ` +
                       `(kubernetes-models ${version})\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
