//! `ctxgate evidence`: store, index, read and project evidence documents (DESIGN §4).

use super::{Global, output};
use anyhow::Context;
use ctxgate::evidence::{Projection, Spec};
use ctxgate::{EvidenceInfo, EvidenceOptions};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;

/// Arguments of `evidence`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Store a document under the evidence root and print its projection (the dual write)
    Put(PutArgs),
    /// Index every file under DIR in place (refs relative to DIR); unchanged files are skipped
    Index(IndexArgs),
    /// Print a stored document, or the part of it at a JSON pointer
    Show(ShowArgs),
    /// Print the projection of a stored document again
    Project(ProjectArgs),
    /// List the indexed documents with their full and projected token estimates
    List,
    /// Drop documents from the index (their files stay on disk)
    Forget(ForgetArgs),
}

/// The projection spec option shared by the subcommands that project.
#[derive(clap::Args)]
struct SpecArg {
    /// Projection spec file (JSON; see docs/evidence.md) [default: $CTXGATE_SPEC, else the default projection]
    #[arg(long, env = "CTXGATE_SPEC", value_name = "FILE")]
    spec: Option<PathBuf>,
}

impl SpecArg {
    fn load(&self) -> anyhow::Result<Option<Spec>> {
        Ok(self.spec.as_deref().map(Spec::load).transpose().map_err(ctxgate::Error::from)?)
    }
}

#[derive(clap::Args)]
struct PutArgs {
    /// The document's ref: a relative path inside the evidence root, e.g. round_3/baseline.json
    #[arg(long = "ref", value_name = "REF")]
    reference: String,
    /// Project as this kind of the spec (default: the spec's `match` globs)
    #[arg(long, value_name = "KIND")]
    kind: Option<String>,
    #[command(flatten)]
    spec: SpecArg,
    /// The document; `-` or nothing reads stdin
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct IndexArgs {
    /// The tree to index; it becomes the evidence root
    dir: PathBuf,
    #[command(flatten)]
    spec: SpecArg,
}

#[derive(clap::Args)]
struct ShowArgs {
    /// The document's ref
    #[arg(value_name = "REF")]
    reference: String,
    /// Only the JSON value at this RFC 6901 pointer, e.g. /result/rows/0
    #[arg(long, value_name = "POINTER")]
    pointer: Option<String>,
}

#[derive(clap::Args)]
struct ProjectArgs {
    /// The document's ref
    #[arg(value_name = "REF")]
    reference: String,
    /// Project as this kind of the spec
    #[arg(long, value_name = "KIND")]
    kind: Option<String>,
    #[command(flatten)]
    spec: SpecArg,
}

#[derive(clap::Args)]
struct ForgetArgs {
    /// Refs of the documents to drop
    #[arg(value_name = "REF", required = true)]
    references: Vec<String>,
}

#[derive(Serialize)]
struct Listed {
    root: String,
    documents: Vec<EvidenceInfo>,
}

#[derive(Serialize)]
struct Forgotten {
    forgotten: u64,
}

/// How the subcommand uses the index: storing evidence creates it, reading needs it.
pub fn access(args: &Args) -> super::Access {
    match args.command {
        Command::Put(_) | Command::Index(_) => super::Access::Create,
        Command::Show(_) | Command::Project(_) | Command::List => super::Access::Read,
        Command::Forget(_) => super::Access::Write,
    }
}

/// Runs an `evidence` subcommand.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    match &args.command {
        Command::Put(a) => {
            // Read up to one byte past the limit: `put_evidence` refuses a larger document, which
            // need not be read whole for that.
            let limit = ctxgate::limits::MAX_EVIDENCE_BYTES + 1;
            let mut bytes = Vec::new();
            match a.file.as_deref() {
                Some(path) if path.as_os_str() != "-" => {
                    let file = std::fs::File::open(path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    file.take(limit).read_to_end(&mut bytes)
                }
                _ => std::io::stdin().lock().take(limit).read_to_end(&mut bytes),
            }
            .context("cannot read the document")?;
            let spec = a.spec.load()?;
            let options = EvidenceOptions { spec: spec.as_ref(), kind: a.kind.as_deref() };
            print_projection(&gatekeeper.put_evidence(&a.reference, &bytes, &options)?)
        }
        Command::Index(a) => {
            let spec = a.spec.load()?;
            let report =
                gatekeeper.index_evidence(&a.dir, &EvidenceOptions { spec: spec.as_ref(), kind: None })?;
            if global.json {
                return output::print_json(&report);
            }
            let mut out = format!(
                "{}: {} indexed, {} unchanged, {} removed, {} skipped\n",
                report.root,
                report.indexed,
                report.unchanged,
                report.removed,
                report.skipped.len()
            );
            for s in &report.skipped {
                let _ = writeln!(out, "  skipped {}: {}", s.path, s.reason);
            }
            output::print_text(&out)
        }
        Command::Show(a) => {
            let bytes = gatekeeper.read_evidence(&a.reference, a.pointer.as_deref())?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            Ok(out.flush()?)
        }
        Command::Project(a) => {
            let spec = a.spec.load()?;
            let options = EvidenceOptions { spec: spec.as_ref(), kind: a.kind.as_deref() };
            print_projection(&gatekeeper.project_evidence(&a.reference, &options)?)
        }
        Command::List => {
            let listed = Listed {
                root: gatekeeper.evidence_root()?.display().to_string(),
                documents: gatekeeper.list_evidence()?,
            };
            if global.json {
                return output::print_json(&listed);
            }
            let mut out = format!("root {}\n", listed.root);
            for d in &listed.documents {
                let _ = writeln!(
                    out,
                    "{}  {}  {} bytes  {} → {} tokens{}",
                    d.evidence_ref,
                    d.kind,
                    d.bytes,
                    d.full_tokens,
                    d.projection_tokens,
                    d.session.as_deref().map(|s| format!("  session {s}")).unwrap_or_default()
                );
            }
            output::print_text(&out)
        }
        Command::Forget(a) => {
            let forgotten = gatekeeper.forget_evidence(&a.references)?;
            if global.json {
                output::print_json(&Forgotten { forgotten })
            } else {
                output::print_text(&format!("{forgotten} document(s) dropped from the index; files kept\n"))
            }
        }
    }
}

/// A projection is its own JSON document (with its own `schema_version`): printed as is,
/// pretty, with or without `--json`.
fn print_projection(projection: &Projection) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, projection)?;
    writeln!(out)?;
    Ok(out.flush()?)
}
