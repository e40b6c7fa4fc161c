//! The remote schema `ctxgate sync init` creates (idempotent), and the row-level security that
//! gives each space its roles.
//!
//! Every change of a space (a pushed batch, a tombstone) takes the space's advisory lock and
//! then a number from `ctxgate_changes`: changes of one space commit in the order of their
//! numbers, so a puller that reads `seq > cursor` never misses a row committed later with a
//! lower number.

/// The tables, the change sequence and the policies. Statements separated by `;` only at
/// line ends (`psql -f` runs it as well).
pub const SCHEMA: &str = r#"CREATE SEQUENCE IF NOT EXISTS ctxgate_changes;

CREATE TABLE IF NOT EXISTS ctxgate_sessions (
    space text NOT NULL,
    session text NOT NULL,
    turns integer NOT NULL CHECK (turns >= 0),
    digest bigint NOT NULL,
    seq bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, session)
);
CREATE INDEX IF NOT EXISTS ctxgate_sessions_by_seq ON ctxgate_sessions (space, seq);

CREATE TABLE IF NOT EXISTS ctxgate_turns (
    space text NOT NULL,
    session text NOT NULL,
    turn_index integer NOT NULL CHECK (turn_index >= 0),
    digest bigint NOT NULL,
    user_text text NOT NULL,
    assistant_text text NOT NULL,
    time text,
    tools jsonb NOT NULL DEFAULT '[]',
    seq bigint NOT NULL,
    PRIMARY KEY (space, session, turn_index)
);

CREATE TABLE IF NOT EXISTS ctxgate_tombstones (
    space text NOT NULL,
    session text NOT NULL,
    seq bigint NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, session)
);
CREATE INDEX IF NOT EXISTS ctxgate_tombstones_by_seq ON ctxgate_tombstones (space, seq);

CREATE TABLE IF NOT EXISTS ctxgate_space_roles (
    space text NOT NULL,
    role name NOT NULL,
    PRIMARY KEY (space, role)
);

ALTER TABLE ctxgate_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE ctxgate_turns ENABLE ROW LEVEL SECURITY;
ALTER TABLE ctxgate_tombstones ENABLE ROW LEVEL SECURITY;
ALTER TABLE ctxgate_space_roles ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS ctxgate_own_grants ON ctxgate_space_roles;
CREATE POLICY ctxgate_own_grants ON ctxgate_space_roles FOR SELECT
    USING (role IN (SELECT rolname FROM pg_roles WHERE pg_has_role(current_user, oid, 'MEMBER')));

DROP POLICY IF EXISTS ctxgate_space_member ON ctxgate_sessions;
CREATE POLICY ctxgate_space_member ON ctxgate_sessions
    USING (space IN (SELECT g.space FROM ctxgate_space_roles g))
    WITH CHECK (space IN (SELECT g.space FROM ctxgate_space_roles g));
DROP POLICY IF EXISTS ctxgate_space_member ON ctxgate_turns;
CREATE POLICY ctxgate_space_member ON ctxgate_turns
    USING (space IN (SELECT g.space FROM ctxgate_space_roles g))
    WITH CHECK (space IN (SELECT g.space FROM ctxgate_space_roles g));
DROP POLICY IF EXISTS ctxgate_space_member ON ctxgate_tombstones;
CREATE POLICY ctxgate_space_member ON ctxgate_tombstones
    USING (space IN (SELECT g.space FROM ctxgate_space_roles g))
    WITH CHECK (space IN (SELECT g.space FROM ctxgate_space_roles g));
"#;

/// What `sync grant` runs: `role` may read and write `space` (and nothing else, unless
/// granted too). `$1` is the space; the role is an identifier, quoted by [`quote_ident`].
pub fn grant(role: &str) -> String {
    let role = quote_ident(role);
    format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ctxgate_sessions, ctxgate_turns, ctxgate_tombstones TO {role};\n\
         GRANT SELECT ON ctxgate_space_roles TO {role};\n\
         GRANT USAGE, SELECT ON SEQUENCE ctxgate_changes TO {role};\n"
    )
}

/// `name` as a quoted SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("alice"), "\"alice\"");
        assert_eq!(quote_ident("a\"; DROP TABLE x; --"), "\"a\"\"; DROP TABLE x; --\"");
        assert!(grant("r\"x").contains("TO \"r\"\"x\";"));
    }
}
