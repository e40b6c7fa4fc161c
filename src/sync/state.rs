//! What sync keeps in the index ([`Gatekeeper::update_client_value`], key `sync`): the shared
//! spaces with this machine's path for each, how far each space was pulled, what each session
//! was last synced at, and the tombstones not pushed yet. Never the remote's URL or password.

use super::SyncError;
use crate::Gatekeeper;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const KEY: &str = "sync";

/// Sync's local state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Shared spaces by name.
    #[serde(default)]
    pub spaces: BTreeMap<String, Space>,
    /// Sessions forgotten here whose tombstones the next sync pushes.
    #[serde(default)]
    pub tombstones: Vec<Tombstone>,
}

/// A shared space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    /// The project part of this machine's session names for the space (`<project>#<id>`), or
    /// `None` for a space that shares the whole index, sessions keeping their names.
    pub project: Option<String>,
    /// The highest change number pulled.
    #[serde(default)]
    pub cursor: i64,
    /// Remote session id → what it was last synced at.
    #[serde(default)]
    pub synced: BTreeMap<String, Synced>,
}

/// A session's state at its last sync: its turns and their digest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Synced {
    /// Turns.
    pub turns: u32,
    /// Digest of those turns ([`super::next_digest`]).
    pub digest: u64,
}

/// A forgotten session of a space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Space.
    pub space: String,
    /// Remote session id.
    pub session: String,
}

impl Space {
    /// The remote id of local session `name`, if the space holds it.
    pub fn remote_id<'n>(&self, name: &'n str) -> Option<&'n str> {
        match &self.project {
            None => Some(name),
            Some(project) => {
                name.strip_prefix(project.as_str())?.strip_prefix('#').filter(|id| !id.is_empty())
            }
        }
    }

    /// The local name of remote session `id`.
    pub fn local_name(&self, id: &str) -> String {
        match &self.project {
            None => id.to_string(),
            Some(project) => format!("{project}#{id}"),
        }
    }
}

/// The state stored in the index (default: nothing shared).
pub fn load(gatekeeper: &Gatekeeper) -> Result<State, SyncError> {
    match gatekeeper.client_value(KEY)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            SyncError::Config(format!("the index's sync state does not parse ({e}): share the spaces again"))
        }),
        None => Ok(State::default()),
    }
}

/// Changes the stored state with `change`, in one transaction of the index (two processes
/// changing it never lose each other's change).
pub fn update(gatekeeper: &Gatekeeper, change: impl FnOnce(&mut State)) -> Result<(), SyncError> {
    let mut parse_error = None;
    gatekeeper.update_client_value(KEY, |old| {
        let mut state: State = match old.as_deref().map(serde_json::from_slice).transpose() {
            Ok(state) => state.unwrap_or_default(),
            Err(e) => {
                parse_error = Some(e);
                return old;
            }
        };
        change(&mut state);
        serde_json::to_vec(&state).ok()
    })?;
    match parse_error {
        Some(e) => Err(SyncError::Config(format!("the index's sync state does not parse ({e})"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_space_maps_names_both_ways() {
        let space = Space { project: Some("/home/a/repo".into()), ..Space::default() };
        assert_eq!(space.remote_id("/home/a/repo#abc"), Some("abc"));
        assert_eq!(space.remote_id("/home/a/repo2#abc"), None);
        assert_eq!(space.remote_id("/home/a/repo#"), None);
        assert_eq!(space.remote_id("other"), None);
        assert_eq!(space.local_name("abc"), "/home/a/repo#abc");
        let all = Space::default();
        assert_eq!(all.remote_id("anything"), Some("anything"));
        assert_eq!(all.local_name("x"), "x");
    }

    #[test]
    fn state_survives_the_index_and_updates_atomically() {
        let dir = tempfile::tempdir().expect("temp dir");
        let gk = Gatekeeper::open(dir.path().join("i.redb"), crate::Options::default()).expect("open");
        assert_eq!(load(&gk).expect("load"), State::default());
        update(&gk, |s| {
            s.spaces.insert("p".into(), Space { project: Some("/r".into()), ..Space::default() });
        })
        .expect("update");
        drop(gk);
        let gk = Gatekeeper::open(dir.path().join("i.redb"), crate::Options::default()).expect("reopen");
        assert_eq!(load(&gk).expect("load").spaces["p"].project.as_deref(), Some("/r"));
    }
}
