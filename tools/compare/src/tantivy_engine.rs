//! tantivy (BM25): ctxgate's anchors as pre-tokenized text (frequencies, no positions: BM25
//! needs no more), the session as a raw `STRING | FAST` field for session-scoped queries, the
//! turn text stored. Bulk import: documents built on the rayon pool and added from it (the
//! writer takes them from any thread). Durable add: `add_document` + `commit` per turn.
//!
//! The project of a hook-style session name (`<project>#<id>`) is a raw `STRING` field too:
//! the team layout's other-sessions query filters on it (a must-match zero-score term) and
//! leaves the prompt's own session out (a must-not term), so tantivy scores only the project's
//! postings' intersection, its best plan for that question.

use crate::common::{
    Figures, Setup, TOP_K, allocated_bytes, cold_then_warm, disk_bytes, query_anchors, record,
    record_peak_rss, turn_anchors,
};
use anyhow::{Result, bail};
use corpus::timing::time_each;
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{PreTokenizedString, Token};
use tantivy::{Index, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

/// Indexing memory of the bulk import, over all writer threads.
const BULK_BUDGET: usize = 256 << 20;
/// Indexing memory of the one-turn-at-a-time writer (one thread).
const ADD_BUDGET: usize = 32 << 20;

fn dir(setup: &Setup) -> PathBuf {
    setup.dir.join("tantivy")
}

#[derive(Clone, Copy)]
struct Fields {
    session: Field,
    project: Field,
    turn: Field,
    text: Field,
    anchors: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let session = builder.add_text_field("session", STRING | FAST);
    let project = builder.add_text_field("project", STRING);
    let turn = builder.add_u64_field("turn", STORED | FAST);
    let text = builder.add_text_field("text", STORED);
    let indexing = TextFieldIndexing::default().set_index_option(IndexRecordOption::WithFreqs);
    let anchors = builder.add_text_field("anchors", TextOptions::default().set_indexing_options(indexing));
    (builder.build(), Fields { session, project, turn, text, anchors })
}

fn fields(index: &Index) -> Result<Fields> {
    let schema = index.schema();
    Ok(Fields {
        session: schema.get_field("session")?,
        project: schema.get_field("project")?,
        turn: schema.get_field("turn")?,
        text: schema.get_field("text")?,
        anchors: schema.get_field("anchors")?,
    })
}

fn document(f: Fields, session: &str, turn: u64, user: &str, assistant: &str) -> TantivyDocument {
    let mut tokens: Vec<Token> = Vec::with_capacity(256);
    turn_anchors(user, assistant, |anchor| {
        tokens.push(Token { position: tokens.len(), text: anchor.to_string(), ..Token::default() })
    });
    let mut doc = TantivyDocument::default();
    doc.add_text(f.session, session);
    if let Some(project) = ctxgate::hook::project_of(session) {
        doc.add_text(f.project, project);
    }
    doc.add_u64(f.turn, turn);
    doc.add_text(f.text, format!("{user}\n\n{assistant}"));
    doc.add_pre_tokenized_text(f.anchors, PreTokenizedString { text: String::new(), tokens });
    doc
}

pub fn bulk(setup: &Setup) -> Result<Figures> {
    let dir = dir(setup);
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let (schema, f) = schema();
    let index = Index::create_in_dir(&dir, schema)?;
    let mut writer: IndexWriter = index.writer(BULK_BUDGET)?;
    let mut turns = 0u64;
    // Fed from the rayon pool, as ctxgate's import extracts anchors: documents are built (the
    // anchor extraction) and handed to the writer's own indexing threads in parallel.
    setup.for_each_chunk(|lines| {
        turns += lines.len() as u64;
        lines.par_iter().try_for_each(|line| {
            let turn = line.turn.unwrap_or_default();
            writer.add_document(document(f, &line.session, turn, &line.user, &line.assistant)).map(|_| ())
        })?;
        Ok(())
    })?;
    writer.commit()?;
    writer.wait_merging_threads()?;
    let seconds = started.elapsed().as_secs_f64();
    if turns != setup.turns {
        bail!("indexed {turns} turns, expected {}", setup.turns);
    }
    let mut figures = Figures::new();
    figures.insert("bulk.seconds".into(), seconds);
    figures.insert("bulk.index_bytes".into(), disk_bytes(&dir)? as f64);
    figures.insert("bulk.allocated_bytes".into(), allocated_bytes(&dir)? as f64);
    record_peak_rss(&mut figures, "bulk.peak_rss_kib");
    Ok(figures)
}

struct Open {
    searcher: Searcher,
    fields: Fields,
}

fn open(setup: &Setup) -> Result<Open> {
    let index = Index::open_in_dir(dir(setup))?;
    let fields = fields(&index)?;
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    Ok(Open { searcher: reader.searcher(), fields })
}

/// BM25 top-k of the query's anchors, within `session` if given (a filter that adds no score).
fn top_k(open: &Open, query: &str, session: Option<&str>) -> Result<usize> {
    let f = open.fields;
    let anchors: Vec<(Occur, Box<dyn Query>)> = query_anchors(query)
        .iter()
        .map(|a| {
            let term = TermQuery::new(Term::from_field_text(f.anchors, a), IndexRecordOption::WithFreqs);
            (Occur::Should, Box::new(term) as Box<dyn Query>)
        })
        .collect();
    let anchors = BooleanQuery::new(anchors);
    let query: Box<dyn Query> = match session {
        None => Box::new(anchors),
        Some(session) => {
            let term = TermQuery::new(Term::from_field_text(f.session, session), IndexRecordOption::Basic);
            Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(ConstScoreQuery::new(Box::new(term), 0.0))),
                (Occur::Must, Box::new(anchors)),
            ]))
        }
    };
    Ok(open.searcher.search(&query, &TopDocs::with_limit(TOP_K).order_by_score())?.len())
}

pub fn query(setup: &Setup) -> Result<Figures> {
    let queries = setup.queries();
    let long = setup.long_name();
    let mut figures = Figures::new();
    cold_then_warm(&mut figures, "session", &queries, || open(setup), |o, q| top_k(o, q, Some(&long)))?;
    cold_then_warm(&mut figures, "global", &queries, || open(setup), |o, q| top_k(o, q, None))?;
    record_peak_rss(&mut figures, "query.peak_rss_kib");
    Ok(figures)
}

pub fn add(setup: &Setup) -> Result<Figures> {
    let index = Index::open_in_dir(dir(setup))?;
    let f = fields(&index)?;
    let mut writer: IndexWriter = index.writer_with_num_threads(1, ADD_BUDGET)?;
    let long = setup.long_name();
    let mut upcoming = setup.upcoming();
    let mut turn = setup.long_turns();
    let times = time_each(setup.adds, |_| {
        let Some(next) = upcoming.next() else { bail!("the corpus is endless") };
        writer.add_document(document(f, &long, turn, &next.user, &next.assistant))?;
        writer.commit()?;
        turn += 1;
        Ok(())
    })?;
    writer.wait_merging_threads()?;
    let mut figures = Figures::new();
    record(&mut figures, "add", &times);
    Ok(figures)
}

/// Where a team-layout query looks.
pub enum Scope<'a> {
    /// Every session.
    All,
    /// One session.
    Session(&'a str),
    /// The other sessions of a project.
    Others { project: &'a str, session: &'a str },
}

impl<'a> Scope<'a> {
    /// The scope of `phase` (`session`, `others` or `global`) for `sample`, and its top-k.
    pub fn of(phase: &str, sample: &'a crate::common::Sample) -> Result<(Scope<'a>, usize)> {
        Ok(match phase {
            "session" => (Scope::Session(&sample.session), TOP_K),
            "others" => (
                Scope::Others { project: &sample.project, session: &sample.session },
                crate::ctxgate_engine::OTHER_SESSIONS_TOP,
            ),
            "global" => (Scope::All, TOP_K),
            other => bail!("unknown query phase {other}"),
        })
    }
}

/// `terms` (scored) within `scope`: filters as zero-score must (and must-not) terms on the raw
/// `session` and `project` fields.
pub fn scoped(terms: Box<dyn Query>, session: Field, project: Field, scope: &Scope) -> Box<dyn Query> {
    let raw = |field, value: &str| -> Box<dyn Query> {
        let term = TermQuery::new(Term::from_field_text(field, value), IndexRecordOption::Basic);
        Box::new(ConstScoreQuery::new(Box::new(term), 0.0))
    };
    match scope {
        Scope::All => terms,
        Scope::Session(name) => {
            Box::new(BooleanQuery::new(vec![(Occur::Must, raw(session, name)), (Occur::Must, terms)]))
        }
        Scope::Others { project: name, session: own } => Box::new(BooleanQuery::new(vec![
            (Occur::Must, raw(project, name)),
            (Occur::MustNot, raw(session, own)),
            (Occur::Must, terms),
        ])),
    }
}

/// Runs `query` for its top `limit`; for the other-sessions query the hits' text is read too,
/// as the hook shows it. Returns the hits.
pub fn search_team(searcher: &Searcher, query: &dyn Query, limit: usize, read_text: bool) -> Result<usize> {
    let top = searcher.search(query, &TopDocs::with_limit(limit).order_by_score())?;
    if read_text {
        for (_, address) in &top {
            let _doc: TantivyDocument = searcher.doc(*address)?;
        }
    }
    Ok(top.len())
}

/// The team layout's queries on ctxgate's anchors (see [`Scope`]).
pub fn team_query(setup: &Setup, phase: &str) -> Result<Figures> {
    let samples = setup.samples()?;
    let mut figures = Figures::new();
    cold_then_warm(
        &mut figures,
        phase,
        &samples,
        || open(setup),
        |o, sample| {
            let (scope, limit) = Scope::of(phase, sample)?;
            let f = o.fields;
            let anchors: Vec<(Occur, Box<dyn Query>)> = query_anchors(&sample.prompt)
                .iter()
                .map(|a| {
                    let term =
                        TermQuery::new(Term::from_field_text(f.anchors, a), IndexRecordOption::WithFreqs);
                    (Occur::Should, Box::new(term) as Box<dyn Query>)
                })
                .collect();
            let query = scoped(Box::new(BooleanQuery::new(anchors)), f.session, f.project, &scope);
            search_team(&o.searcher, query.as_ref(), limit, phase == "others")
        },
    )?;
    record_peak_rss(&mut figures, &format!("{phase}.peak_rss_kib"));
    Ok(figures)
}
