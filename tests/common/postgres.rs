//! A real PostgreSQL server for the sync tests: Debian's `postgresql` package, started in a
//! unique temporary directory on a free loopback port with `initdb` and `pg_ctl`, as an
//! unprivileged user when the tests run as root (initdb refuses root). Stopped when dropped.
//!
//! Where no server can be had, [`Server::start`] says why and returns `None` (the test passes)
//! unless `CTXGATE_REQUIRE_POSTGRES=1`.

use std::path::PathBuf;
use std::process::Command;

/// The superuser's name and password (scram-sha-256 over TCP).
pub const ADMIN: &str = "ctxgate_admin";
pub const ADMIN_PASSWORD: &str = "admin-pw-for-tests";

/// A running server.
pub struct Server {
    dir: tempfile::TempDir,
    bin: PathBuf,
    user: Option<String>,
    /// The loopback port it listens on.
    pub port: u16,
}

impl Server {
    /// Starts a new server, or says why it cannot and returns `None`.
    pub fn start() -> Option<Server> {
        match Server::try_start() {
            Ok(server) => Some(server),
            Err(why) => {
                if std::env::var_os("CTXGATE_REQUIRE_POSTGRES").is_some_and(|v| v == "1") {
                    panic!("PostgreSQL is required (CTXGATE_REQUIRE_POSTGRES=1) but cannot start: {why}");
                }
                eprintln!(
                    "skipped: no PostgreSQL server for the sync tests ({why}); apt-get install postgresql"
                );
                None
            }
        }
    }

    fn try_start() -> Result<Server, String> {
        let bin = find_bin().ok_or("no initdb and pg_ctl found in /usr/lib/postgresql/*/bin")?;
        let user = match is_root() {
            true => Some(
                unprivileged_user().ok_or("running as root and neither user postgres nor nobody exists")?,
            ),
            false => None,
        };
        let dir = tempfile::Builder::new().prefix("ctxgate-pg-").tempdir().map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, ADMIN_PASSWORD).map_err(|e| e.to_string())?;
        if let Some(user) = &user {
            // The server's user must reach its files: the directory is 0700 and root's.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            let (uid, gid) = ids_of(user).ok_or("cannot find the user's ids")?;
            std::fs::create_dir(&data).map_err(|e| e.to_string())?;
            for path in [dir.path(), &data, &pwfile] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
            }
        }
        let mut server = Server { dir, bin, user, port: 0 };
        let initdb = server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", ADMIN, "--auth=scram-sha-256", "--no-sync", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !initdb.status.success() {
            return Err(format!("initdb failed: {}", String::from_utf8_lossy(&initdb.stderr).trim()));
        }
        server.port = free_port().map_err(|e| e.to_string())?;
        server.run_pg_ctl_start()?;
        Ok(server)
    }

    fn run_pg_ctl_start(&self) -> Result<(), String> {
        let data = self.dir.path().join("data");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60",
            self.port,
            self.dir.path().display()
        );
        let started = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .output()
            .map_err(|e| format!("pg_ctl: {e}"))?;
        if !started.status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
            return Err(format!(
                "pg_ctl start failed: {} {log}",
                String::from_utf8_lossy(&started.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Starts the stopped server again, on the same port.
    pub fn restart(&self) -> Result<(), String> {
        self.run_pg_ctl_start()
    }

    /// Stops the server at once (`-m immediate`: as a crash, no checkpoint).
    pub fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }

    /// The URL of the database for `user` (the password comes from the environment).
    pub fn url(&self, user: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/postgres?sslmode=disable", self.port)
    }

    /// The superuser's URL, password included.
    pub fn admin_url(&self) -> String {
        format!("postgres://{ADMIN}:{ADMIN_PASSWORD}@127.0.0.1:{}/postgres?sslmode=disable", self.port)
    }

    /// A client connected as the superuser.
    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.admin_url(), postgres::NoTls).expect("the admin connects")
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match &self.user {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(path).current_dir(self.dir.path());
                cmd
            }
            None => Command::new(path),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn find_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
}

/// Whether the tests run as root: `/proc/self` belongs to the process's effective user.
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn unprivileged_user() -> Option<String> {
    ["postgres", "nobody"].into_iter().find(|u| ids_of(u).is_some()).map(str::to_string)
}

fn ids_of(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&user) && fields.len() > 3)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))?
    })
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
