//! The topics: each one a vocabulary of slot values that the shared phrasing is filled from.
//!
//! Slot values are fragments that fit the templates in [`crate::phrases`]: `sym` and `zsym` are
//! clauses ("the lock expires before the job finishes"), `cause`/`zcause` complete "this usually
//! means ...", `fix`/`zfix` complete "I would ..." / "建议...". Topics share words on purpose
//! (`redis` in two of them, `index` in three, `timeout` in four) so they overlap like real ones.

mod backend;
mod chinese;
mod infra;

/// The language a topic is usually discussed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English.
    En,
    /// Chinese, with English identifiers, commands and error messages.
    Zh,
}

/// One topic's vocabulary.
pub(crate) struct TopicData {
    pub name: &'static str,
    pub title: &'static str,
    pub native: Lang,
    pub kw: &'static [&'static str],
    pub zkw: &'static [&'static str],
    pub id: &'static [&'static str],
    pub err: &'static [&'static str],
    pub path: &'static [&'static str],
    pub ver: &'static [&'static str],
    pub cmd: &'static [&'static str],
    pub code: &'static [&'static str],
    pub sym: &'static [&'static str],
    pub zsym: &'static [&'static str],
    pub cause: &'static [&'static str],
    pub zcause: &'static [&'static str],
    pub fix: &'static [&'static str],
    pub zfix: &'static [&'static str],
}

/// Every topic; [`crate::TopicId`] is an index into this list, so only append.
pub(crate) const TOPICS: &[&TopicData] = &[
    &backend::REDIS_LOCK,
    &backend::ASYNCIO_TIMEOUT,
    &backend::POSTGRES_INDEX,
    &infra::K8S_DEPLOY,
    &backend::RUST_LIFETIME,
    &infra::CI_PIPELINE,
    &infra::DOCKER_BUILD,
    &backend::KAFKA_CONSUMER,
    &backend::REACT_STATE,
    &infra::GIT_REBASE,
    &infra::NGINX_TLS,
    &infra::PYTHON_DEPS,
    &infra::TERRAFORM_STATE,
    &backend::JWT_AUTH,
    &chinese::ZH_DISTRIBUTED_LOCK,
    &chinese::ZH_DB_INDEX,
    &chinese::ZH_CONTAINER_ORCHESTRATION,
    &chinese::ZH_MEMORY_LEAK,
    &chinese::ZH_MONITORING,
    &chinese::ZH_SLOW_QUERY,
];
