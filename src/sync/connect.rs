//! Connecting to the remote: the URL (`--remote` or `$CTXGATE_REMOTE`), completed from the
//! environment as libpq does (`PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`, `PGPASSWORD`, then
//! the password file), over TLS unless the URL says otherwise. Nothing of it is stored.

use super::{SyncError, pgpass};
use postgres::config::{Host, SslMode};
use postgres::{Client, Config};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait for the server to answer a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection settings of `url`, completed from the environment. Without a `sslmode` in
/// the URL, TLS is required (`prefer` would fall back to plain text on a network).
pub fn config(url: &str) -> Result<Config, SyncError> {
    let mut config = Config::from_str(url).map_err(|e| {
        SyncError::Config(format!(
            "the remote {:?} is not a PostgreSQL URL or connection string ({e}): use postgres://USER@HOST:PORT/DATABASE",
            redact_password(url)
        ))
    })?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if config.get_hosts().is_empty() {
        config.host(env("PGHOST").as_deref().unwrap_or("localhost"));
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port = port.parse().map_err(|_| SyncError::Config(format!("PGPORT={port:?} is not a port")))?;
        config.port(port);
    }
    if config.get_user().is_none() {
        match env("PGUSER").or_else(|| env("USER")) {
            Some(user) => config.user(&user),
            None => {
                return Err(SyncError::Config(
                    "no user: put one in the URL (postgres://USER@HOST/DB) or set PGUSER".into(),
                ));
            }
        };
    }
    if config.get_dbname().is_none()
        && let Some(db) = env("PGDATABASE")
    {
        config.dbname(&db);
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(&password);
        } else if let Some(password) = password_file(&config) {
            config.password(&password);
        }
    }
    if !mentions_sslmode(url) {
        config.ssl_mode(SslMode::Require);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.application_name("ctxgate sync");
    Ok(config)
}

/// Connects with `config`: TLS verified against the system's root certificates, unless
/// `sslmode=disable`.
pub fn connect(config: &Config, url: &str) -> Result<Client, SyncError> {
    let failed = |e: postgres::Error| {
        SyncError::Remote(format!(
            "cannot connect to {}: {e} (check the URL, the server, and its credentials: the environment's PGPASSWORD or ~/.pgpass)",
            redact_password(url)
        ))
    };
    match config.get_ssl_mode() {
        SslMode::Disable => config.connect(postgres::NoTls).map_err(failed),
        _ => config.connect(tls()?).map_err(failed),
    }
}

fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, SyncError> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        log::warn!("root certificates: {error}");
    }
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        log::warn!("no root certificates found on this system: TLS connections will be refused");
    }
    // ring, deprecated in rustls 0.23.48 for lacking post-quantum key exchange: the
    // alternative, aws-lc-rs, needs cmake and a C build on every machine that builds ctxgate.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SyncError::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The password the password file has for this connection.
fn password_file(config: &Config) -> Option<String> {
    let path = pgpass::default_path()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(host) => host.clone(),
        #[cfg(unix)]
        Host::Unix(_) => "localhost".to_string(),
    };
    let user = config.get_user()?;
    let target = pgpass::Target {
        host: &host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        database: config.get_dbname().unwrap_or(user),
        user,
    };
    pgpass::lookup(&path, &target)
}

/// Whether the connection string sets `sslmode` (URL query or key=value form).
fn mentions_sslmode(url: &str) -> bool {
    if let Some(rest) = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://")) {
        // Only a key of the query counts, not `sslmode=` inside a password or another value.
        let query = rest.split_once('?').map_or("", |(_, q)| q);
        return query
            .split('&')
            .any(|pair| pair.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("sslmode")));
    }
    key_value(url, "sslmode").is_some()
}

/// The span of `key`'s value in a `key = value` connection string (a value may be quoted, with
/// `\'` and `\\` escaped, as libpq reads it), or `None` if no pair has that key.
fn key_value(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key_start = i;
        while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let found = &text[key_start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes.get(i) != Some(&b'=') {
            return None; // not a key = value string
        }
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let value_start = i;
        if bytes.get(i) == Some(&b'\'') {
            i += 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(bytes.len());
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        if found.eq_ignore_ascii_case(key) {
            return Some(value_start..i);
        }
    }
    None
}

/// `url` with any password replaced, for messages.
pub fn redact_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        // The user information ends at the authority's last `@` (a password may hold one).
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let mut out = match before_query.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => format!("{scheme}://{userinfo}@{host}"),
            },
            None => format!("{scheme}://{before_query}"),
        };
        if let Some(query) = query {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => pair.to_string(),
                })
                .collect();
            out.push('?');
            out.push_str(&pairs.join("&"));
        }
        return out;
    }
    match key_value(url, "password") {
        Some(value) => format!("{}***{}", &url[..value.start], &url[value.end..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_is_required_unless_the_url_says_otherwise() {
        let required = config("postgres://u@db.example/ctx").expect("config");
        assert_eq!(required.get_ssl_mode(), SslMode::Require);
        let disabled = config("postgres://u@127.0.0.1/ctx?sslmode=disable").expect("config");
        assert_eq!(disabled.get_ssl_mode(), SslMode::Disable);
        let preferred = config("host=db user=u sslmode=prefer").expect("config");
        assert_eq!(preferred.get_ssl_mode(), SslMode::Prefer);
        // `sslmode=` inside another value is not a setting: TLS stays required.
        let hidden = config("postgres://u@127.0.0.1/ctx?application_name=sslmode=disable").expect("config");
        assert_eq!(hidden.get_ssl_mode(), SslMode::Require);
        let spaced = config("host=db user=u sslmode = disable").expect("config");
        assert_eq!(spaced.get_ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact_password("postgres://u:s3cret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_password("host=h password=s3cret"), "host=h password=***");
        assert_eq!(redact_password("host=h password = 's3 cret' user=u"), "host=h password = *** user=u");
        assert_eq!(redact_password("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            redact_password("postgres://u@h/db?password=s3cret&x=1"),
            "postgres://u@h/db?password=***&x=1"
        );
        let err = config("postgres://u:s3cret@h:notaport/db").expect_err("bad port");
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
