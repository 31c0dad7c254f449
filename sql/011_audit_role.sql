-- webhook-idempotency schema, migration 11: the database role behind each audit row.
--
-- `actor` is the name the operator gave (`webhook-admin --actor`, default $USER): free text, anyone may
-- write any name. The audit row now also records the role the session logged in as, `session_user`
-- ("the session user is normally the user who initiated the current database connection", PostgreSQL docs,
-- "System Information Functions"; `SET ROLE` does not change it, unlike `current_user`), by the column's
-- default, so the row says which database credential made the change whatever the actor text says. Behind
-- a pooler it is the role the pooler logs in as. Rows written before this migration have no role (NULL).
-- A catalog change only: no table rewrite. The schema appears only as the double-quoted placeholder
-- webhook_idempotency (see 001).

ALTER TABLE "webhook_idempotency".webhook_audit ADD COLUMN IF NOT EXISTS db_role text;
ALTER TABLE "webhook_idempotency".webhook_audit ALTER COLUMN db_role SET DEFAULT session_user;

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (11) ON CONFLICT (version) DO NOTHING;
