//! tantivy on its own tokenizer (`tantivy-own`, the team layout): the turn text in one field
//! tokenized by tantivy's `default` analyzer (split on non-alphanumeric characters, lowercased;
//! frequencies, no positions: BM25 needs no more), stored; session and project as raw `STRING`
//! fields for the scoped queries (see [`crate::tantivy_engine::Scope`]). Bulk import: the JSONL
//! parsed on the rayon pool, each document handed to the writer, whose own threads tokenize
//! and index it: what a user of tantivy alone would write. The query is the prompt through the
//! same analyzer, its distinct terms as should-match term queries.

use crate::common::{Figures, Setup, allocated_bytes, cold_then_warm, disk_bytes, record_peak_rss};
use crate::tantivy_engine::{Scope, scoped, search_team};
use anyhow::{Result, bail};
use std::path::PathBuf;
use std::time::Instant;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

/// Indexing memory of the bulk import, over all writer threads (as `tantivy_engine`'s).
const BULK_BUDGET: usize = 256 << 20;

fn dir(setup: &Setup) -> PathBuf {
    setup.dir.join("tantivy-own")
}

#[derive(Clone, Copy)]
struct Fields {
    session: Field,
    project: Field,
    turn: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let session = builder.add_text_field("session", STRING | FAST);
    let project = builder.add_text_field("project", STRING);
    let turn = builder.add_u64_field("turn", STORED | FAST);
    let indexing =
        TextFieldIndexing::default().set_tokenizer("default").set_index_option(IndexRecordOption::WithFreqs);
    let text =
        builder.add_text_field("text", TextOptions::default().set_indexing_options(indexing).set_stored());
    (builder.build(), Fields { session, project, turn, text })
}

fn fields(index: &Index) -> Result<Fields> {
    let schema = index.schema();
    Ok(Fields {
        session: schema.get_field("session")?,
        project: schema.get_field("project")?,
        turn: schema.get_field("turn")?,
        text: schema.get_field("text")?,
    })
}

pub fn bulk(setup: &Setup) -> Result<Figures> {
    let dir = dir(setup);
    std::fs::create_dir_all(&dir)?;
    let started = Instant::now();
    let (schema, f) = schema();
    let index = Index::create_in_dir(&dir, schema)?;
    let mut writer: IndexWriter = index.writer(BULK_BUDGET)?;
    let mut turns = 0u64;
    setup.for_each_chunk(|lines| {
        for line in lines {
            turns += 1;
            let mut doc = TantivyDocument::default();
            doc.add_text(f.session, &line.session);
            if let Some(project) = ctxgate::hook::project_of(&line.session) {
                doc.add_text(f.project, project);
            }
            doc.add_u64(f.turn, line.turn.unwrap_or_default());
            doc.add_text(f.text, format!("{}\n\n{}", line.user, line.assistant));
            writer.add_document(doc)?;
        }
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
    analyzer: TextAnalyzer,
    fields: Fields,
}

fn open(setup: &Setup) -> Result<Open> {
    let index = Index::open_in_dir(dir(setup))?;
    let fields = fields(&index)?;
    let analyzer = index.tokenizer_for_field(fields.text)?;
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    Ok(Open { searcher: reader.searcher(), analyzer, fields })
}

/// The prompt's distinct terms through the field's analyzer.
fn terms(analyzer: &mut TextAnalyzer, prompt: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    analyzer.token_stream(prompt).process(&mut |token| terms.push(token.text.clone()));
    terms.sort();
    terms.dedup();
    terms
}

/// The team layout's queries (see [`Scope`]).
pub fn team_query(setup: &Setup, phase: &str) -> Result<Figures> {
    let samples = setup.samples()?;
    let mut figures = Figures::new();
    let open = || open(setup).map(std::cell::RefCell::new);
    cold_then_warm(&mut figures, phase, &samples, open, |o, sample| {
        let (scope, limit): (Scope, usize) = Scope::of(phase, sample)?;
        let mut o = o.borrow_mut();
        let f = o.fields;
        let should: Vec<(Occur, Box<dyn Query>)> = terms(&mut o.analyzer, &sample.prompt)
            .iter()
            .map(|t| {
                let term = TermQuery::new(Term::from_field_text(f.text, t), IndexRecordOption::WithFreqs);
                (Occur::Should, Box::new(term) as Box<dyn Query>)
            })
            .collect();
        let query = scoped(Box::new(BooleanQuery::new(should)), f.session, f.project, &scope);
        search_team(&o.searcher, query.as_ref(), limit, phase == "others")
    })?;
    record_peak_rss(&mut figures, &format!("{phase}.peak_rss_kib"));
    Ok(figures)
}
