"""JSON Schema → GBNF: the llama.cpp grammar that constrains the embedded model's replies.

A reply is decoded under a grammar (`local_prompt`), so the grammar decides which texts the model
can write at all, spaces included. The grammars follow llama.cpp's own JSON-Schema conversion,
whose layout the committed replies were made under:

- an object is `{`, its required properties in the schema's order, then any of its optional
  properties in order (and, where `additionalProperties` is a schema, further `"key": value`
  pairs), then `}`; an absent `additionalProperties` allows no other key;
- one optional space after `{`, `[`, `,`, `:` and after every value, except that an `enum` or
  `const` value is the bare JSON literal (so `{ "action": "shoot B1"} ` is a reply, with no
  space before the `}`);
- `minimum`/`maximum` of numbers and integers are not enforced by the grammar (the caller
  validates the reply); `maxLength`, `minLength`, `maxItems` and `minItems` are.

Only what bsjax's schemas use is supported: `type` object, array, string, number, integer,
boolean, null; `enum`, `const`; `properties`, `required`, `additionalProperties`; `items`,
`minItems`, `maxItems`; `minLength`, `maxLength`. Anything else raises `UnsupportedSchema`, and
the caller falls back to `JSON_OBJECT` (any JSON object).
"""

from __future__ import annotations

import json
import re

# Any JSON object, spaces and newlines allowed between tokens: llama.cpp's `json.gbnf` language
# (its exponent, `[0-9] [1-9]{0,15}`, is kept as it is so that the same replies come out).
JSON_OBJECT = r'''
root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" ws
number ::= ( "-"? ( [0-9] | [1-9] [0-9]{0,15} ) ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9] [1-9]{0,15} )? ws
ws ::= | " " | "\n" [ \t]{0,20}
'''

# Values of a schema's primitive types; each ends in an optional space.
_PRIMITIVES = {
    "space": '" "?',
    "char": r'[^"\\] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "integral-part": "[0-9] | [1-9] [0-9]{0,15}",
    "decimal-part": "[0-9]{1,16}",
    "integer": '( "-"? integral-part ) space',
    "number": '( "-"? integral-part ) ( "." decimal-part )? ( [eE] [-+]? integral-part )? space',
    "boolean": '( "true" | "false" ) space',
    "null": '"null" space',
    "string": r'"\"" char* "\"" space',
}
_KNOWN_KEYS = {"type", "enum", "const", "properties", "required", "additionalProperties",
               "items", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
               "description", "title"}


class UnsupportedSchema(ValueError):
    """A schema with a keyword or type this converter does not handle."""


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") \
        .replace("\r", "\\r")
    return f'"{escaped}"'


def json_literal(value) -> str:
    """The JSON text of `value` as a GBNF literal (an enum or const member)."""
    return literal(json.dumps(value))


def _repeat(item: str, low: int, high: int | None) -> str:
    if high is None:
        return f"{item}*" if low == 0 else f"{item}{{{low},}}"
    return f"{item}{{{low},{high}}}"


class _Grammar:
    def __init__(self):
        self.rules: dict[str, str] = {}

    def primitive(self, name: str) -> str:
        """`name`'s rule, added with the primitive rules it refers to."""
        if name not in self.rules:
            body = self.rules[name] = _PRIMITIVES[name]
            unquoted = re.sub(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]', " ", body)
            for need in set(re.findall(r"[a-z][a-z-]*", unquoted)) & set(_PRIMITIVES):
                self.primitive(need)
        return name

    def add(self, name: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "rule"
        unique, k = name, 1
        while unique in self.rules and self.rules[unique] != body:
            k += 1
            unique = f"{name}{k}"
        self.rules[unique] = body
        return unique

    def visit(self, schema, name: str) -> str:
        """The rule name (or inline expression) for values of `schema`."""
        if schema is True or schema == {}:
            raise UnsupportedSchema("an unconstrained value")
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"not a schema: {schema!r}"[:80])
        unknown = set(schema) - _KNOWN_KEYS
        if unknown:
            raise UnsupportedSchema(f"unsupported keyword(s) {sorted(unknown)}")
        if "const" in schema:
            return self.add(name, json_literal(schema["const"]))
        if "enum" in schema:
            values = list(schema["enum"])
            if not values:
                raise UnsupportedSchema("an empty enum")
            return self.add(name, " | ".join(json_literal(v) for v in values))
        kind = schema.get("type")
        if kind == "object":
            return self._object(schema, name)
        if kind == "array":
            return self._array(schema, name)
        if kind == "string" and ("minLength" in schema or "maxLength" in schema):
            self.primitive("char")
            self.primitive("space")
            chars = _repeat("char", int(schema.get("minLength", 0)), schema.get("maxLength"))
            return self.add(name, rf'"\"" {chars} "\"" space')
        if kind in ("string", "number", "integer", "boolean", "null"):
            return self.primitive(kind)
        raise UnsupportedSchema(f"unsupported type {kind!r}")

    def _object(self, schema: dict, name: str) -> str:
        properties = schema.get("properties", {})
        required = [key for key in properties if key in set(schema.get("required", []))]
        if set(schema.get("required", [])) - set(properties):
            raise UnsupportedSchema("a required property without a schema")
        optional = [key for key in properties if key not in required]
        kv = {key: self.add(f"{name}-{key}-kv", f'{literal(json.dumps(key))} space ":" space '
                            f'{self.visit(properties[key], f"{name}-{key}")}')
              for key in properties}
        self.primitive("space")
        extra = schema.get("additionalProperties", False)
        more = None  # further "key": value pairs
        if extra is not False:
            value = self.visit(extra, f"{name}-additional-value")
            pair = self.add(f"{name}-additional-kv",
                            f'{self.primitive("string")} ":" space {value}')
            more = self.add(f"{name}-additional-kvs", f'{pair} ( "," space {pair} )*')
        # Any of the optional pairs in order, then (where allowed) further pairs:
        # rest(i) ::= ( "," space kv(i+1) )? rest(i+1), the last rest offering the further pairs.
        tail = f'( "," space {more} )?' if more else ""
        rests: dict[str, str] = {}
        for i in range(len(optional) - 1, -1, -1):
            after = [f'( "," space {kv[optional[i + 1]]} )? {rests[optional[i + 1]]}'.strip()] \
                if i + 1 < len(optional) else ([tail] if tail else [])
            rests[optional[i]] = self.add(f"{name}-{optional[i]}-rest", " ".join(after)) \
                if after else ""
        starts = [f"{kv[key]} {rests[key]}".strip() for key in optional]
        if more:
            starts.append(more)
        choice = " | ".join(starts)
        head = ' "," space '.join(kv[key] for key in required)
        if head and choice:
            body = f'"{{" space {head} ( "," space ( {choice} ) )? "}}" space'
        elif head:
            body = f'"{{" space {head} "}}" space'
        elif choice:
            body = f'"{{" space ( {choice} )? "}}" space'
        else:
            body = '"{" space "}" space'
        return self.add(name, body)

    def _array(self, schema: dict, name: str) -> str:
        if "items" not in schema:
            raise UnsupportedSchema("an array without items")
        item = self.visit(schema["items"], f"{name}-item")
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
        high = None if high is None else int(high)
        self.primitive("space")
        if high == 0:
            return self.add(name, '"[" space "]" space')
        more = _repeat(f'( "," space {item} )', max(0, low - 1),
                       None if high is None else high - 1)
        items = f"{item} {more}"
        body = f'"[" space {items} "]" space' if low > 0 else f'"[" space ( {items} )? "]" space'
        return self.add(name, body)


def from_schema(schema: dict) -> str:
    """The GBNF grammar (root rule `root`) of the replies `schema` accepts; raises
    UnsupportedSchema for what the converter does not handle."""
    grammar = _Grammar()
    top = grammar.visit(schema, "root")
    if top != "root":
        grammar.rules["root"] = top
    return "\n".join(f"{rule} ::= {body}" for rule, body in sorted(grammar.rules.items())) + "\n"


def grammar_for(schema: dict | None) -> str:
    """The grammar of a call's replies: its JSON Schema's, or any JSON object for None or for a
    schema the converter does not handle (as llama.cpp's own conversion falls back)."""
    if schema is not None:
        try:
            return from_schema(schema)
        except UnsupportedSchema:
            pass
    return JSON_OBJECT


__all__ = ["JSON_OBJECT", "UnsupportedSchema", "from_schema", "grammar_for", "json_literal",
           "literal"]
