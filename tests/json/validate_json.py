#!/usr/bin/env python3
"""Validates `loom ... --json` output against its schema (docs/schema/*.schema.json).

    validate_json.py [--engine auto|jsonschema|builtin] SCHEMA FILE...

Each FILE must hold exactly one JSON document (nothing before or after it) that the
schema accepts. The engine: the `jsonschema` module when it is installed (auto), else a
built-in validator of the subset of JSON Schema 2020-12 that Loom's schemas use (type,
const, enum, properties, required, additionalProperties, items, minItems, maxItems,
minimum, pattern, oneOf, allOf, if/then, not, local $ref), so machines without the
module (the GPU machine) still validate. tests/cpu/driver/test_cli_json.cpp runs both
engines on the same documents.

Exit status: 0 all valid, 1 a document is invalid (each problem printed), 2 a usage or
schema error, 77 --engine jsonschema without the module (apt-get install
python3-jsonschema, as scripts/install-deps.sh does, or pip install jsonschema).
"""
import json
import re
import sys

SKIP = 77
SUPPORTED = {"$schema", "$id", "$defs", "$ref", "title", "description", "type", "const", "enum",
             "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
             "minimum", "pattern", "oneOf", "allOf", "if", "then", "not", "format"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


class Builtin:
    """The subset of JSON Schema that docs/schema/ uses; anything else is a schema error."""

    def __init__(self, schema):
        self.root = schema
        self.check_schema(schema, "#")

    def check_schema(self, s, where):
        if isinstance(s, bool):
            return
        if not isinstance(s, dict):
            raise ValueError(f"{where}: a schema must be an object")
        for k, v in s.items():
            if k not in SUPPORTED:
                raise ValueError(f"{where}: keyword {k} is not supported by the built-in engine")
            if k in ("properties", "$defs"):
                for name, sub in v.items():
                    self.check_schema(sub, f"{where}/{k}/{name}")
            elif k in ("items", "additionalProperties", "if", "then", "not"):
                self.check_schema(v, f"{where}/{k}")
            elif k in ("oneOf", "allOf"):
                for i, sub in enumerate(v):
                    self.check_schema(sub, f"{where}/{k}/{i}")
            elif k == "$ref" and not v.startswith("#/"):
                raise ValueError(f"{where}: only local $ref is supported ({v})")

    def resolve(self, ref):
        node = self.root
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def errors(self, v, s, path):
        if s is True:
            return []
        if s is False:
            return [(path, "no value is allowed here")]
        out = []
        if "$ref" in s:
            out += self.errors(v, self.resolve(s["$ref"]), path)
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(TYPES[t](v) for t in types):
                return out + [(path, f"{json.dumps(v)[:80]} is not of type {' or '.join(types)}")]
        if "const" in s and v != s["const"]:
            out.append((path, f"{json.dumps(s['const'])} was expected"))
        if "enum" in s and v not in s["enum"]:
            out.append((path, f"{json.dumps(v)[:80]} is not one of {s['enum']}"))
        if "minimum" in s and TYPES["number"](v) and v < s["minimum"]:
            out.append((path, f"{v} is less than the minimum of {s['minimum']}"))
        if "pattern" in s and isinstance(v, str) and not re.search(s["pattern"], v):
            out.append((path, f"{v!r} does not match {s['pattern']!r}"))
        if isinstance(v, dict):
            props = s.get("properties", {})
            for name in s.get("required", []):
                if name not in v:
                    out.append((path, f"{name!r} is a required property"))
            for name, value in v.items():
                if name in props:
                    out += self.errors(value, props[name], path + [name])
                elif "additionalProperties" in s:
                    extra = s["additionalProperties"]
                    if extra is False:
                        out.append((path, f"additional property {name!r} is not allowed"))
                    else:
                        out += self.errors(value, extra, path + [name])
        if isinstance(v, list):
            if "minItems" in s and len(v) < s["minItems"]:
                out.append((path, f"{len(v)} items, fewer than {s['minItems']}"))
            if "maxItems" in s and len(v) > s["maxItems"]:
                out.append((path, f"{len(v)} items, more than {s['maxItems']}"))
            if "items" in s:
                for i, item in enumerate(v):
                    out += self.errors(item, s["items"], path + [i])
        for sub in s.get("allOf", []):
            out += self.errors(v, sub, path)
        if "oneOf" in s:
            results = [self.errors(v, sub, path) for sub in s["oneOf"]]
            passing = sum(1 for r in results if not r)
            if passing != 1:
                best = min(results, key=len) if passing == 0 else []
                out += best or [(path, f"valid under {passing} of the oneOf schemas, not exactly one")]
        if "if" in s and not self.errors(v, s["if"], path) and "then" in s:
            out += self.errors(v, s["then"], path)
        if "not" in s and not self.errors(v, s["not"], path):
            out.append((path, "matches a schema it must not match"))
        return out


def validator_for(schema, engine):
    if engine in ("auto", "jsonschema"):
        try:
            import jsonschema
        except ImportError:
            if engine == "jsonschema":
                print(f"validate_json.py: the python module jsonschema is missing for {sys.executable}: "
                      "apt-get install python3-jsonschema, or pip install jsonschema", file=sys.stderr)
                sys.exit(SKIP)
        else:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            v = cls(schema, format_checker=cls.FORMAT_CHECKER)

            def check(doc):
                out = []
                for e in v.iter_errors(doc):
                    for r in (e.context or [e])[:8]:  # oneOf: the branches' reasons
                        out.append((list(r.absolute_path), r.message))
                return out
            return check
    b = Builtin(schema)
    return lambda doc: b.errors(doc, schema, [])


def main(argv):
    engine = "auto"
    args = argv[1:]
    if args and args[0].startswith("--engine="):
        engine = args.pop(0).split("=", 1)[1]
    if len(args) < 2 or engine not in ("auto", "jsonschema", "builtin"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        schema = json.load(f)
    try:
        check = validator_for(schema, engine)
    except Exception as e:  # a schema error of either engine
        print(f"{args[0]}: not a valid schema: {e}", file=sys.stderr)
        return 2
    bad = 0
    for path in args[1:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            doc = json.loads(text)  # the whole text: anything beside the document fails
        except json.JSONDecodeError as e:
            print(f"{path}: not one JSON document: {e}\n--- text ---\n{text[:2000]}", file=sys.stderr)
            bad += 1
            continue
        errors = check(doc)
        for where, message in errors:
            print(f"{path}: {'/'.join(map(str, where)) or '(document)'}: {message}", file=sys.stderr)
        bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
