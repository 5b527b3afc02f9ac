// Package serve answers PostgreSQL clients (the v3 wire protocol: psql,
// psycopg2 and pandas, JDBC, pgx, node-postgres, Grafana) with the views
// of a bucket's worlds: a session's database names its world, its
// settings pin a point (worldfs.at), and every statement runs on a DuckDB
// database sql.Open returns, through sql's statement gate, as worldfs sql
// runs it: no other query path (docs/INTERNALS.md, "serve").
//
// The protocol's messages are pgx's pgproto3; values are encoded by pgx's
// pgtype.
package serve
