//! `compare child floor redb`: what redb itself takes for one durable commit of a turn's text,
//! the floor under ctxgate's durable add. Each commit inserts the next turn's user and
//! assistant text as one row of one table, in a file of its own, in the multi-writer mode
//! ctxgate opens its index in (every commit two-phase, allocator state saved) and in redb's
//! default exclusive-writer mode (one-phase commit, one sync) for comparison.

use crate::common::{Figures, Setup, record};
use anyhow::{Result, bail};
use corpus::timing::time_each;
use redb::{ConcurrencyMode, Database, TableDefinition};

const ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("rows");

pub fn floor(setup: &Setup) -> Result<Figures> {
    let mut figures = Figures::new();
    for (name, mode) in
        [("multi_writer", ConcurrencyMode::MultiWriter), ("exclusive", ConcurrencyMode::ExclusiveWriter)]
    {
        let path = setup.dir.join(format!("floor-{name}.redb"));
        let _ = std::fs::remove_file(&path);
        let times = {
            let db = Database::builder().set_concurrency_mode(mode).create(&path)?;
            let mut upcoming = setup.upcoming();
            time_each(setup.adds, |i| {
                let Some(turn) = upcoming.next() else { bail!("the corpus is endless") };
                let row = [turn.user.as_bytes(), turn.assistant.as_bytes()].concat();
                let txn = db.begin_write()?;
                txn.open_table(ROWS)?.insert(i as u64, row.as_slice())?;
                txn.commit()?;
                Ok(())
            })?
        };
        std::fs::remove_file(&path)?;
        record(&mut figures, &format!("floor.{name}"), &times);
    }
    Ok(figures)
}
