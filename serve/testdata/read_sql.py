"""Runs the queries of the JSON document on stdin ({"dsn": ..., "queries":
[{"text": ..., "params": [...]}]}) with pandas.read_sql over psycopg2, and
prints one JSON document: per query its columns and rows, each value
written as DuckDB writes it (CAST(value AS VARCHAR): what worldfs sql
--format csv prints), or its error (message, pgcode)."""

import datetime
import decimal
import json
import math
import sys

import pandas as pd
import psycopg2
import psycopg2.extras

# JSON values as the text the server sent, not parsed.
psycopg2.extras.register_default_json(loads=lambda s: s)


def text(v):
    """v, a value pandas gives, as DuckDB writes it."""
    if v is None or v is pd.NaT:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        v = v.item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        if v.microsecond:
            s += (".%06d" % v.microsecond).rstrip("0")
        off = v.utcoffset()
        if off is not None:
            minutes = int(off.total_seconds() // 60)
            sign = "+" if minutes >= 0 else "-"
            minutes = abs(minutes)
            s += "%s%02d" % (sign, minutes // 60)
            if minutes % 60:
                s += ":%02d" % (minutes % 60)
        return s
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "".join(chr(b) if 32 <= b < 127 and b != 92 else "\\x%02X" % b for b in bytes(v))
    if isinstance(v, list):
        return "[" + ", ".join("NULL" if e is None else text(e) for e in v) + "]"
    return str(v)


def main():
    job = json.load(sys.stdin)
    conn = psycopg2.connect(job["dsn"])
    conn.autocommit = job.get("autocommit", False)
    out = []
    for q in job["queries"]:
        try:
            df = pd.read_sql(q["text"], conn, params=q.get("params") or None, coerce_float=False)
            rows = [[text(v) for v in row] for row in df.itertuples(index=False, name=None)]
            out.append({"columns": list(df.columns), "rows": rows})
        except Exception as e:  # noqa: BLE001 — every error is reported
            out.append({"error": str(e).strip(), "code": getattr(e, "pgcode", None)})
            conn.rollback()
    conn.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
