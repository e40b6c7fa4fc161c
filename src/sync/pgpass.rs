//! The password file libpq reads (`~/.pgpass`, or `$PGPASSFILE`): one
//! `hostname:port:database:username:password` entry a line, `*` matching anything, `\:` and
//! `\\` escaping, `#` starting a comment; the first matching line wins. As libpq does, a
//! file that group or others may read is ignored (with a warning) on Unix.

use std::path::{Path, PathBuf};

/// What a connection is looked up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// Host name (a Unix socket directory counts as `localhost`, as libpq's).
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// Database.
    pub database: &'a str,
    /// User.
    pub user: &'a str,
}

/// The password file: `$PGPASSFILE`, else `~/.pgpass`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PGPASSFILE") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".pgpass"))
}

/// The password of the first entry of `path` that matches `target`; `None` when there is no
/// file, it is unsafe, or nothing matches.
pub fn lookup(path: &Path, target: &Target<'_>) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            log::warn!(
                "{}: ignored, group or others may read it (chmod 600 it, as libpq requires)",
                path.display()
            );
            return None;
        }
    }
    find(&text, target)
}

/// The password of the first line of `text` that matches `target`.
pub fn find(text: &str, target: &Target<'_>) -> Option<String> {
    let port = target.port.to_string();
    text.lines().filter(|line| !line.trim_start().starts_with('#')).find_map(|line| {
        let fields = split(line)?;
        let wanted = [target.host, port.as_str(), target.database, target.user];
        let matches = fields.iter().zip(wanted).all(|(field, want)| field == "*" || field == want);
        matches.then(|| fields[4].clone())
    })
}

/// The five fields of a line, unescaped; `None` for a line that has fewer.
fn split(line: &str) -> Option<[String; 5]> {
    let mut fields: Vec<String> = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.extend(chars.next()),
            // The password is the rest of the line: a `:` in it needs no escape.
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Target<'static> = Target { host: "db.example", port: 5432, database: "ctx", user: "alice" };

    #[test]
    fn the_first_matching_line_wins_and_stars_match_anything() {
        let text = "# comment\nother:5432:ctx:alice:no\ndb.example:*:ctx:alice:first\n*:*:*:*:second\n";
        assert_eq!(find(text, &TARGET).as_deref(), Some("first"));
        assert_eq!(find("*:*:*:*:any\n", &TARGET).as_deref(), Some("any"));
        assert_eq!(find("db.example:5433:ctx:alice:x\n", &TARGET), None);
        assert_eq!(find("db.example:5432:ctx:bob:x\n", &TARGET), None);
    }

    #[test]
    fn escapes_and_short_lines() {
        let target = Target { host: "h:1", ..TARGET };
        assert_eq!(find(r"h\:1:5432:ctx:alice:pa\\ss:word", &target).as_deref(), Some(r"pa\ss:word"));
        assert_eq!(find("db.example:5432:ctx\n", &TARGET), None);
        assert_eq!(find("", &TARGET), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_may_read_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(lookup(&path, &TARGET), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(lookup(&path, &TARGET).as_deref(), Some("secret"));
    }
}
