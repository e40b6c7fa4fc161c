//! Inserting new keys in ascending order through one redb cursor.
//!
//! `Table::insert` descends the B-tree for every key and changes one leaf at a time. A
//! [`redb::CursorMut`] buffers the inserts that fall into the gap it stands in and builds them
//! into full leaves together, so a bulk writer that has its rows sorted (an import's turns, a
//! run, the merge of the runs) stores them for a fraction of the cost. The cursor only has to
//! move when a stored key comes before the next new one.

use super::Error;
use redb::{CursorMut, Key, Table, Value};
use std::ops::Bound;

/// The stored key after a cursor's gap when it was placed there. The cursor's own inserts go
/// before it, so it stays the gap's neighbour among the stored keys.
struct Gap<K> {
    after: Option<K>,
}

impl<K> Gap<K>
where
    K: Key + for<'a> Value<SelfType<'a> = K> + 'static,
{
    /// The gap `cursor` stands in.
    fn of(cursor: &mut CursorMut<'_, K, &'static [u8]>) -> Result<Self, Error> {
        let after = cursor.peek_next()?.map(|(key, _)| key.value());
        Ok(Gap { after })
    }
}

/// Inserts `entries`, whose keys ascend and are not in `table` yet.
///
/// A key that is out of order or already stored is an error ([`redb::CursorError`]), and
/// leaves the transaction to be aborted.
pub(crate) fn insert_new<'v, K>(
    table: &mut Table<'_, K, &'static [u8]>,
    entries: impl IntoIterator<Item = (K, &'v [u8])>,
) -> Result<(), Error>
where
    K: Key + for<'a> Value<SelfType<'a> = K> + Copy + Ord + 'static,
{
    let mut entries = entries.into_iter().peekable();
    let Some(&(first, _)) = entries.peek() else { return Ok(()) };
    let mut cursor = table.lower_bound_mut(Bound::Included(first))?;
    let mut gap = Gap::of(&mut cursor)?;
    for (key, value) in entries {
        if gap.after.is_some_and(|next| next <= key) {
            cursor.close()?;
            cursor = table.lower_bound_mut(Bound::Included(key))?;
            gap = Gap::of(&mut cursor)?;
        }
        cursor.insert_before(key, value)?;
    }
    cursor.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{ReadableTable, TableDefinition};

    const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("t");

    fn stored(table: &Table<'_, u64, &'static [u8]>) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let mut out = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            out.push((key.value(), value.value().to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn new_keys_go_between_the_stored_ones_in_order() -> Result<(), Box<dyn std::error::Error>> {
        let file = tempfile::NamedTempFile::new()?;
        let db = redb::Database::create(file.path())?;
        let txn = db.begin_write()?;
        {
            let mut table = txn.open_table(TABLE)?;
            // Stored: every tenth key; new: the rest, in runs between them and after the end.
            for key in (0..2000u64).step_by(10) {
                table.insert(key, key.to_be_bytes().as_slice())?;
            }
            let new: Vec<(u64, [u8; 8])> =
                (0..2100u64).filter(|k| k % 10 != 0).map(|k| (k, k.to_be_bytes())).collect();
            insert_new(&mut table, new.iter().map(|(k, v)| (*k, v.as_slice())))?;
            let expected: Vec<(u64, Vec<u8>)> = (0..2000u64)
                .step_by(10)
                .chain(new.iter().map(|(k, _)| *k))
                .map(|k| (k, k.to_be_bytes().to_vec()))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into_iter()
                .collect();
            assert_eq!(stored(&table)?, expected);
            // A key already stored, or one out of order, is refused.
            assert!(insert_new(&mut table, [(3u64, b"x".as_slice())]).is_err());
        }
        txn.abort()?;
        let txn = db.begin_write()?;
        {
            let mut table = txn.open_table(TABLE)?;
            assert!(insert_new(&mut table, [(5u64, b"x".as_slice()), (4, b"y".as_slice())]).is_err());
        }
        Ok(())
    }
}
