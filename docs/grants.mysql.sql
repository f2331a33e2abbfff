-- rocketmq-tx: table-level MariaDB/MySQL grants, one account per component (nothing global).
-- Generated from rocketMqTxGrants() (src/store/typeorm/grants.ts); test/unit/grants.test.ts keeps
-- this file equal to it, test/integration/least-privilege.test.ts runs every component under them.
-- Replace the database `rocketmq_tx` and the accounts; create the accounts first, e.g.
--   CREATE USER 'rmqtx_producer'@'%' IDENTIFIED BY '<a password from your secret store>';
-- Another database or account: rocketMqTxGrants(component, { database, user }) prints the same lines.
-- Your business tables (the producer's work, the consumer's handlers, the fact query) are not here.

-- 1. Before the migrations: the deploy user (runs rocketMqTxMigrations and rocketMqTxArchiveMigrations
--    with migrationsTableName "migrations", TypeORM's default; REFERENCES and DROP serve a revert).
GRANT CREATE, INDEX, DROP, REFERENCES ON `rocketmq_tx`.`tx_record` TO 'rmqtx_migrations'@'%';
GRANT CREATE, INDEX, DROP, REFERENCES ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_migrations'@'%';
GRANT CREATE, INDEX, DROP, REFERENCES ON `rocketmq_tx`.`consumed_event` TO 'rmqtx_migrations'@'%';
GRANT CREATE, INDEX, DROP, REFERENCES ON `rocketmq_tx`.`aggregate_cursor` TO 'rmqtx_migrations'@'%';
GRANT CREATE, INDEX, DROP, REFERENCES ON `rocketmq_tx`.`outbox_event_archive` TO 'rmqtx_migrations'@'%';
GRANT SELECT, INSERT, DELETE, CREATE ON `rocketmq_tx`.`migrations` TO 'rmqtx_migrations'@'%';

-- 2. After the migrations (a table must exist to be granted). Without the archive migration, leave out
--    the lines that name outbox_event_archive.

-- producer
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`tx_record` TO 'rmqtx_producer'@'%';
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_producer'@'%';

-- consumer
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`consumed_event` TO 'rmqtx_consumer'@'%';
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`aggregate_cursor` TO 'rmqtx_consumer'@'%';

-- relay
GRANT SELECT, UPDATE ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_relay'@'%';
GRANT SELECT ON `rocketmq_tx`.`tx_record` TO 'rmqtx_relay'@'%';

-- status
GRANT SELECT ON `rocketmq_tx`.`tx_record` TO 'rmqtx_status'@'%';
GRANT SELECT ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_status'@'%';
GRANT SELECT ON `rocketmq_tx`.`consumed_event` TO 'rmqtx_status'@'%';

-- deadLetter
GRANT SELECT, UPDATE ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_dead_letter'@'%';

-- retention
GRANT SELECT, DELETE ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_retention'@'%';
GRANT SELECT, DELETE ON `rocketmq_tx`.`tx_record` TO 'rmqtx_retention'@'%';
GRANT SELECT, DELETE ON `rocketmq_tx`.`consumed_event` TO 'rmqtx_retention'@'%';
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`outbox_event_archive` TO 'rmqtx_retention'@'%';

-- reconcile
GRANT SELECT, INSERT, UPDATE ON `rocketmq_tx`.`outbox_event` TO 'rmqtx_reconcile'@'%';
GRANT SELECT ON `rocketmq_tx`.`outbox_event_archive` TO 'rmqtx_reconcile'@'%';
GRANT INSERT ON `rocketmq_tx`.`tx_record` TO 'rmqtx_reconcile'@'%';
