#!/usr/bin/env python3
"""`kustomize build` for the features deploy/k8s/kustomization.yaml uses.

  kustomize_build.py <kustomization directory>

Prints the objects `kubectl apply -k <directory>` would apply, as a JSON
array. Neither kubectl nor kustomize can be installed from Debian's
archive, so //deploy:k8s_kustomization_test builds the kustomization with
this; where kubectl is present the test checks the two agree.

Implemented as kustomize 5 does them:
  resources          YAML files in the directory (not directories, not URLs)
  generatorOptions   disableNameSuffixHash: true only (the Jobs name the
                     Secrets; see docs/operations.md, "Kubernetes")
  secretGenerator    name, namespace, type, files ([key=]path; the key is
                     the file's name unless given)
  images             name, newName, newTag, digest, applied to every
                     container and init container
Paths may not leave the directory (kustomize's default load restrictor).
Anything else in the kustomization is refused by name rather than ignored,
so the test cannot pass on a kustomization it does not understand. Like
kubectl's strict decoding, a key repeated in one YAML mapping is an error.
Exits 1 with the reason on any error.
"""
import base64
import json
import os
import re
import sys

import yaml


class BuildError(Exception):
    pass


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with a repeated key."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise BuildError("line %d: key %r appears twice in one mapping" %
                             (key_node.start_mark.line + 1, key))
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_documents(path):
    with open(path, encoding="utf-8") as f:
        try:
            return [d for d in yaml.load_all(f, Loader=_StrictLoader)
                    if d is not None]
        except yaml.YAMLError as e:
            raise BuildError("%s: %s" % (path, e))


def _check_fields(where, mapping, allowed):
    if not isinstance(mapping, dict):
        raise BuildError("%s must be a mapping, not %r" % (where, mapping))
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise BuildError(
            "%s: %s not implemented by kustomize_build.py (it knows %s); "
            "extend it, or the test would check something else than kubectl "
            "applies" % (where, ", ".join(unknown), ", ".join(sorted(allowed))))


def _inside(root, relative, what):
    """The path of `relative` under `root`, refusing one that leaves it."""
    if not isinstance(relative, str) or not relative:
        raise BuildError("%s: %r is not a file name" % (what, relative))
    if os.path.isabs(relative):
        raise BuildError("%s: %s is absolute; kustomize loads files from the "
                         "kustomization's directory only" % (what, relative))
    path = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([path, os.path.realpath(root)]) != \
            os.path.realpath(root):
        raise BuildError("%s: %s is outside %s; kustomize refuses it" %
                         (what, relative, root))
    if not os.path.isfile(path):
        raise BuildError("%s: %s does not exist in %s (or is not a file)" %
                         (what, relative, root))
    return path


def _generate_secret(root, generator, disable_hash):
    _check_fields("secretGenerator entry", generator,
                  ["name", "namespace", "type", "files"])
    name = generator.get("name")
    if not isinstance(name, str) or not name:
        raise BuildError("secretGenerator entry without a name: %r" % generator)
    if not disable_hash:
        raise BuildError(
            "secretGenerator %s: name suffix hashes are not implemented; set "
            "generatorOptions.disableNameSuffixHash: true" % name)
    data = {}
    for source in generator.get("files") or []:
        if not isinstance(source, str):
            raise BuildError("secretGenerator %s: file %r is not a string" %
                             (name, source))
        key, _, relative = source.rpartition("=")
        key = key or os.path.basename(relative)
        if not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
            raise BuildError("secretGenerator %s: %r is not a valid key" %
                             (name, key))
        if key in data:
            raise BuildError("secretGenerator %s: key %s twice" % (name, key))
        path = _inside(root, relative, "secretGenerator %s" % name)
        with open(path, "rb") as f:
            data[key] = base64.b64encode(f.read()).decode("ascii")
    metadata = {"name": name}
    if generator.get("namespace") is not None:
        metadata["namespace"] = generator["namespace"]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
            "type": generator.get("type") or "Opaque", "data": data}


def split_image(image):
    """(name, tag, digest) of [registry[:port]/]path[:tag][@digest]."""
    name, _, digest = image.partition("@")
    tag = ""
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def _apply_image(image, override):
    name, tag, digest = split_image(image)
    if name != override["name"]:
        return image
    name = override.get("newName") or name
    new_tag = override.get("newTag")
    new_digest = override.get("digest")
    if new_tag is not None or new_digest is not None:
        tag = new_tag or ""
        digest = new_digest or ""
    return name + (":" + tag if tag else "") + ("@" + digest if digest else "")


def _override_images(node, overrides):
    """Applies `overrides` to every container under `node`, in place."""
    if isinstance(node, list):
        for item in node:
            _override_images(item, overrides)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("containers", "initContainers") and isinstance(value, list):
            for container in value:
                if isinstance(container, dict) and \
                        isinstance(container.get("image"), str):
                    for override in overrides:
                        container["image"] = _apply_image(container["image"],
                                                          override)
        _override_images(value, overrides)


def _object_id(obj):
    metadata = obj.get("metadata") or {}
    return (obj.get("apiVersion"), obj.get("kind"), metadata.get("namespace"),
            metadata.get("name"))


def build(root):
    """The objects of the kustomization in directory `root`."""
    path = os.path.join(root, "kustomization.yaml")
    if not os.path.isfile(path):
        raise BuildError("%s has no kustomization.yaml" % root)
    documents = load_yaml_documents(path)
    if len(documents) != 1:
        raise BuildError("%s: expected one YAML document" % path)
    (kustomization,) = documents
    _check_fields(path, kustomization,
                  ["apiVersion", "kind", "resources", "generatorOptions",
                   "secretGenerator", "images"])
    if kustomization.get("kind", "Kustomization") != "Kustomization" or \
            kustomization.get("apiVersion", "kustomize.config.k8s.io/v1beta1") \
            != "kustomize.config.k8s.io/v1beta1":
        raise BuildError("%s is not a kustomize.config.k8s.io/v1beta1 "
                         "Kustomization" % path)
    objects = []
    for resource in kustomization.get("resources") or []:
        for obj in load_yaml_documents(_inside(root, resource, "resources")):
            if not isinstance(obj, dict):
                raise BuildError("%s: a document is not an object" % resource)
            objects.append(obj)
    options = kustomization.get("generatorOptions") or {}
    _check_fields("generatorOptions", options, ["disableNameSuffixHash"])
    overrides = kustomization.get("images") or []
    for override in overrides:
        _check_fields("images entry", override,
                      ["name", "newName", "newTag", "digest"])
        if not isinstance(override.get("name"), str) or \
                re.search(r"[:@]", override["name"]):
            raise BuildError("images entry %r: name must be an image name "
                             "without tag or digest" % override)
        for field in ("newName", "newTag", "digest"):
            if field in override and not isinstance(override[field], str):
                raise BuildError("images entry %s: %s must be a string (quote "
                                 "it), not %r" % (override["name"], field,
                                                  override[field]))
    _override_images(objects, overrides)
    for generator in kustomization.get("secretGenerator") or []:
        objects.append(_generate_secret(
            root, generator, options.get("disableNameSuffixHash") is True))
    seen = set()
    for obj in objects:
        if _object_id(obj) in seen:
            raise BuildError("two objects are %s %s/%s" % (
                obj.get("kind"), _object_id(obj)[2], _object_id(obj)[3]))
        seen.add(_object_id(obj))
    return objects


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        objects = build(argv[1])
    except BuildError as e:
        print("kustomize_build: %s" % e, file=sys.stderr)
        return 1
    json.dump(objects, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
