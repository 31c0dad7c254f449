-- webhook-idempotency schema, migration 11: the database role behind each audit row.
--
-- `actor` is the name the operator gave (`webhook-admin --actor`, default $USER): free text, anyone may
-- write any name. The audit row now also records the role the session logged in as, `session_user`
-- ("the session user is normally the user who initiated the current database connection", PostgreSQL docs,
-- "System Information Functions"; `SET ROLE` does not change it, unlike `current_user`), so the row says
-- which database credential made the change whatever the actor text says. Behind a pooler it is the role
-- the pooler logs in as. Rows written before this migration have no role (NULL).
--
-- A `BEFORE INSERT OR UPDATE` row trigger sets it, not only the column's default: a default is what an
-- INSERT gets when it names no value, and any role that may insert an audit row (every operator role) could
-- otherwise name another operator's role, or NULL, which reads as "written before migration 11". On INSERT
-- the trigger replaces whatever the statement gave with `session_user`; on UPDATE it keeps the row's role.
-- The function is not SECURITY DEFINER: it runs as the writer, whose session it names. Only the table's
-- owner (or a superuser) can disable the trigger; give operator roles INSERT and SELECT on the table, not
-- ownership. Idempotent: `CREATE OR REPLACE FUNCTION`, and the trigger dropped if it exists and created
-- again (`CREATE OR REPLACE TRIGGER` needs PostgreSQL 14). A catalog change only: no table rewrite. The
-- schema appears only as the double-quoted placeholder webhook_idempotency (see 001).

ALTER TABLE "webhook_idempotency".webhook_audit ADD COLUMN IF NOT EXISTS db_role text;
ALTER TABLE "webhook_idempotency".webhook_audit ALTER COLUMN db_role SET DEFAULT session_user;

CREATE OR REPLACE FUNCTION "webhook_idempotency".webhook_audit_db_role() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.db_role := session_user;
    ELSE
        NEW.db_role := OLD.db_role;
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS webhook_audit_db_role ON "webhook_idempotency".webhook_audit;
CREATE TRIGGER webhook_audit_db_role BEFORE INSERT OR UPDATE ON "webhook_idempotency".webhook_audit
    FOR EACH ROW EXECUTE FUNCTION "webhook_idempotency".webhook_audit_db_role();

INSERT INTO "webhook_idempotency".webhook_schema_migrations (version) VALUES (11) ON CONFLICT (version) DO NOTHING;
