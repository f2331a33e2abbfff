-- rocketmq-tx: PostgreSQL (15+) grants, one role per component (table privileges and USAGE on the
-- schema; nothing database-wide). Generated from rocketMqTxGrants(component, { dialect: 'postgres',
-- database: 'public', user }) (src/store/typeorm/grants.ts); test/unit/grants.test.ts keeps this file
-- equal to it, test/contract/grants.test.ts runs status, dead-letter, retention, reconcile and the
-- migrations under them (on PostgreSQL and MariaDB).
-- Replace the schema "public" and the roles; create the roles first, e.g.
--   CREATE ROLE rmqtx_producer LOGIN PASSWORD '<a password from your secret store>';
-- The SDK names its tables unqualified: the schema must be the first of each role's search_path
-- (ALTER ROLE rmqtx_producer SET search_path = orders, for a schema other than public).
-- Your business tables (the producer's work, the consumer's handlers, the fact query) are not here.

-- 1. Before the migrations: the deploy role creates the tables (and TypeORM's migrations table),
--    so it owns them: only an owner may index, alter or drop a table on PostgreSQL.
GRANT USAGE, CREATE ON SCHEMA "public" TO "rmqtx_migrations";

-- 2. After the migrations (a table must exist to be granted). Without the archive migration, leave out
--    the lines that name outbox_event_archive.

-- producer
GRANT USAGE ON SCHEMA "public" TO "rmqtx_producer";
GRANT SELECT, INSERT, UPDATE ON TABLE "public"."tx_record" TO "rmqtx_producer";
GRANT SELECT, INSERT, UPDATE ON TABLE "public"."outbox_event" TO "rmqtx_producer";

-- consumer
GRANT USAGE ON SCHEMA "public" TO "rmqtx_consumer";
GRANT SELECT, INSERT, UPDATE ON TABLE "public"."consumed_event" TO "rmqtx_consumer";
GRANT SELECT, INSERT, UPDATE ON TABLE "public"."aggregate_cursor" TO "rmqtx_consumer";

-- relay
GRANT USAGE ON SCHEMA "public" TO "rmqtx_relay";
GRANT SELECT, UPDATE ON TABLE "public"."outbox_event" TO "rmqtx_relay";
GRANT SELECT ON TABLE "public"."tx_record" TO "rmqtx_relay";

-- status
GRANT USAGE ON SCHEMA "public" TO "rmqtx_status";
GRANT SELECT ON TABLE "public"."tx_record" TO "rmqtx_status";
GRANT SELECT ON TABLE "public"."outbox_event" TO "rmqtx_status";
GRANT SELECT ON TABLE "public"."consumed_event" TO "rmqtx_status";

-- deadLetter
GRANT USAGE ON SCHEMA "public" TO "rmqtx_dead_letter";
GRANT SELECT, UPDATE ON TABLE "public"."outbox_event" TO "rmqtx_dead_letter";

-- retention
GRANT USAGE ON SCHEMA "public" TO "rmqtx_retention";
GRANT SELECT, DELETE ON TABLE "public"."outbox_event" TO "rmqtx_retention";
GRANT SELECT, DELETE ON TABLE "public"."tx_record" TO "rmqtx_retention";
GRANT SELECT, DELETE ON TABLE "public"."consumed_event" TO "rmqtx_retention";
GRANT SELECT, INSERT ON TABLE "public"."outbox_event_archive" TO "rmqtx_retention";

-- reconcile
GRANT USAGE ON SCHEMA "public" TO "rmqtx_reconcile";
GRANT SELECT, INSERT ON TABLE "public"."outbox_event" TO "rmqtx_reconcile";
GRANT SELECT ON TABLE "public"."outbox_event_archive" TO "rmqtx_reconcile";
GRANT INSERT ON TABLE "public"."tx_record" TO "rmqtx_reconcile";
