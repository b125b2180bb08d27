"""Trims a CRD's OpenAPI v3 schema to the fields some manifests use; writes it as JSON.

    python tests/data/crds/trim_crd.py CRD.yaml VERSION OUT.json MANIFEST.yaml [...]

Keeps, from the ``openAPIV3Schema`` of ``VERSION``, every property that one of the manifests
sets (recursively: object properties, list items, map values), with its type, format,
enum, pattern, bounds, ``required`` list and ``x-kubernetes-*`` markers; drops every other
property, every ``description`` and the CEL rules (``x-kubernetes-validations``, which
jsonschema cannot evaluate). A property a manifest sets that the CRD does not define is
not added, so the test that validates the manifests still rejects it. Run it again after a
manifest starts using a field the fixture lacks (README.md beside this file).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

_DROP = {"description", "x-kubernetes-validations"}


def trim(schema: dict[str, Any], instances: list[Any]) -> dict[str, Any]:
    """``schema`` with only what ``instances`` (values found at its place) use."""
    out = {k: v for k, v in schema.items()
           if k not in _DROP and k not in ("properties", "items", "additionalProperties",
                                            "anyOf", "allOf", "oneOf")}
    for key in ("anyOf", "allOf", "oneOf"):
        if key in schema:
            out[key] = [trim(s, instances) for s in schema[key]]
    objects = [i for i in instances if isinstance(i, dict)]
    if "properties" in schema:
        used = {k for o in objects for k in o}
        out["properties"] = {
            name: trim(sub, [o[name] for o in objects if name in o])
            for name, sub in schema["properties"].items() if name in used}
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = trim(schema["additionalProperties"],
                                           [v for o in objects for v in o.values()])
    elif "additionalProperties" in schema:
        out["additionalProperties"] = schema["additionalProperties"]
    if "items" in schema:
        out["items"] = trim(schema["items"], [v for i in instances if isinstance(i, list)
                                              for v in i])
    return out


def main(argv: list[str]) -> int:
    crd_path, version, out_path, *manifests = argv
    crd = yaml.safe_load(open(crd_path))
    [spec] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    docs = [d for m in manifests for d in yaml.safe_load_all(open(m)) if d]
    schema = trim(spec["schema"]["openAPIV3Schema"], docs)
    with open(out_path, "w") as f:
        json.dump(schema, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
