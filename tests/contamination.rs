//! The seed's regression test (seed 000 §8): 4 topics × 25 turns, interleaved round-robin and
//! in runs, in English, Chinese and mixed text. In the agent loop (select the next user message
//! against the history so far, then add the turn) no selected block may come from another
//! topic, while topic switches, the content-word filter, budget exhaustion and deictic
//! continuation are all exercised.
//!
//! The topics share generic phrasing the way real conversations do (`problem`, `suggest`,
//! `production`, `请问一下`, `怎么解决`, whole question frames), so a selection that counts
//! generic words as evidence would pick off-topic blocks. Their technical vocabularies are
//! distinct: a block that shares a technical word with the query is not contamination a lexical
//! method could be asked to avoid.

use ctxgate::{Gatekeeper, Options, SelectOptions, Topic};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Language {
    English,
    Chinese,
    Mixed,
}

#[derive(Clone, Copy, Debug)]
enum Layout {
    /// A B C D A B C D ...
    RoundRobin,
    /// 25 × A, then 25 × B, ...
    Runs,
}

const TOPICS: usize = 4;
const TURNS_PER_TOPIC: usize = 25;

/// Topic-specific subjects: each turn talks about three of them.
fn subjects(language: Language, topic: usize) -> &'static [&'static str] {
    const EN: [&[&str]; TOPICS] = [
        &[
            "the redis lock",
            "SETNX with a ttl",
            "the redlock algorithm",
            "the lock lease",
            "the watchdog renewal",
            "the lua unlock script",
            "the owner token",
            "sentinel failover",
            "the lock key prefix",
            "expired leases",
            "clock drift between redis nodes",
            "the fencing token",
        ],
        &[
            "asyncio tasks",
            "the event loop",
            "asyncio.gather",
            "asyncio.wait_for",
            "task cancellation",
            "the aiohttp session",
            "a blocking call inside a coroutine",
            "asyncio.Semaphore",
            "TaskGroup",
            "uvloop",
            "the coroutine scheduler",
            "run_in_executor",
        ],
        &[
            "the postgres planner",
            "a btree index",
            "EXPLAIN ANALYZE",
            "the sequential scan",
            "autovacuum",
            "a partial index",
            "the GIN index",
            "column statistics",
            "the query plan",
            "index bloat",
            "pg_stat_statements",
            "the composite index order",
        ],
        &[
            "the kubernetes deployment",
            "the readiness probe",
            "CrashLoopBackOff",
            "the helm chart",
            "the rolling update",
            "replica count",
            "the ingress controller",
            "the configmap",
            "pod eviction",
            "the node selector",
            "kubectl rollout",
            "resource limits",
        ],
    ];
    const ZH: [&[&str]; TOPICS] = [
        &[
            "分布式锁",
            "看门狗续期",
            "锁的过期时间",
            "红锁算法",
            "主从切换丢锁",
            "锁自动释放",
            "加锁脚本",
            "锁的持有者标识",
            "可重入锁",
            "锁竞争激烈",
            "解锁校验",
            "锁续约定时器",
        ],
        &[
            "协程调度",
            "事件循环",
            "并发任务取消",
            "异步超时控制",
            "阻塞调用卡住协程",
            "信号量限流",
            "异步连接池",
            "任务组异常",
            "回调地狱",
            "异步上下文管理",
            "线程池卸载",
            "协程泄漏",
        ],
        &[
            "联合索引",
            "回表查询",
            "覆盖索引",
            "慢查询日志",
            "执行计划",
            "最左前缀原则",
            "索引失效",
            "全表扫描",
            "索引选择性",
            "统计信息陈旧",
            "分区表索引",
            "索引碎片",
        ],
        &[
            "滚动更新",
            "就绪探针",
            "副本数量",
            "镜像拉取失败",
            "节点亲和性",
            "容器反复重启",
            "资源配额",
            "服务网格",
            "环境变量注入",
            "存活探针",
            "灰度发布",
            "水平自动扩缩容",
        ],
    ];
    const MIXED: [&[&str]; TOPICS] = [
        &[
            "redis 的 SETNX 锁",
            "redlock 算法",
            "锁的 ttl",
            "watchdog 续期",
            "lua 解锁脚本",
            "owner token 校验",
            "sentinel 主从切换",
            "lock lease 过期",
            "fencing token 机制",
            "redis 集群时钟漂移",
            "锁 key 前缀",
            "expired lease 清理",
        ],
        &[
            "asyncio 的 event loop",
            "asyncio.gather 并发",
            "wait_for 超时",
            "task cancellation 传播",
            "aiohttp session 复用",
            "coroutine 里的 blocking call",
            "Semaphore 限流",
            "TaskGroup 异常",
            "uvloop 性能",
            "run_in_executor 线程池",
            "coroutine 泄漏",
            "event loop 卡顿",
        ],
        &[
            "postgres 的 planner",
            "btree index 选择",
            "EXPLAIN ANALYZE 输出",
            "seq scan 全表扫描",
            "autovacuum 配置",
            "partial index 条件",
            "GIN index 全文检索",
            "pg_stat_statements 统计",
            "composite index 顺序",
            "index bloat 膨胀",
            "query plan 回退",
            "column statistics 陈旧",
        ],
        &[
            "kubernetes deployment 清单",
            "readiness probe 探针",
            "CrashLoopBackOff 重启",
            "helm chart 模板",
            "rolling update 策略",
            "replica 数量",
            "ingress controller 路由",
            "configmap 热更新",
            "pod eviction 驱逐",
            "node selector 调度",
            "kubectl rollout 回滚",
            "resource limits 配额",
        ],
    ];
    match language {
        Language::English => EN[topic],
        Language::Chinese => ZH[topic],
        Language::Mixed => MIXED[topic],
    }
}

/// Generic phrasing shared by every topic: `{}` is where the subjects go.
fn user_frames(language: Language) -> &'static [&'static str] {
    match language {
        Language::English => &[
            "I have a problem with {a} in production, what do you suggest?",
            "Is there a better way to handle {a} and {b}?",
            "Can you explain the difference between {a} and {b}?",
            "We keep seeing errors around {a}, how should I configure {b}?",
            "Thanks, that helps. One more problem: {a} together with {b}.",
            "What is the recommended setup for {a} when {b} is involved?",
        ],
        Language::Chinese | Language::Mixed => &[
            "请问一下，{a}在线上环境出问题了，怎么解决？",
            "我遇到一个问题：{a}和{b}，有什么建议吗？",
            "能解释一下{a}和{b}的区别吗？",
            "{a}总是报错，{b}具体应该怎么配置？",
            "谢谢，还有一个问题，{a}加上{b}的时候怎么解决？",
            "请问一下，{a}遇到{b}的推荐做法是什么？",
        ],
    }
}

fn assistant_frames(language: Language) -> &'static [&'static str] {
    match language {
        Language::English => &[
            "The usual approach is to look at {a} first. In production I would also check {b}.",
            "I would suggest starting with {a}. A common mistake is to ignore {b}.",
            "Good question. {a} matters most here, and {b} is the second thing to verify.",
        ],
        Language::Chinese | Language::Mixed => &[
            "一般的做法是先检查{a}。线上环境还要注意{b}。",
            "建议先从{a}入手，常见的错误是忽略了{b}。",
            "好问题。这里最关键的是{a}，其次要确认{b}。",
        ],
    }
}

/// Deictic follow-ups (only where the previous turn is on the same topic).
fn deictic_frames(language: Language) -> &'static [&'static str] {
    match language {
        Language::English => {
            &["It still fails after changing {a}, what else should I check?", "This breaks {a} again."]
        }
        Language::Chinese | Language::Mixed => {
            &["这个改了{a}以后还是不行，还要检查什么？", "那个{a}又出问题了。"]
        }
    }
}

struct Turn {
    topic: usize,
    user: String,
    assistant: String,
    deictic: bool,
}

fn fill(frame: &str, a: &str, b: &str) -> String {
    frame.replace("{a}", a).replace("{b}", b)
}

/// The k-th turn (0..25) of `topic`.
fn topic_turn(language: Language, topic: usize, k: usize, allow_deictic: bool, shift: usize) -> Turn {
    let subjects = subjects(language, topic);
    let n = subjects.len();
    let (a, b, c) = (subjects[k % n], subjects[(k * 5 + 3) % n], subjects[(k * 7 + 5) % n]);
    let deictic = allow_deictic && k % 6 == 5;
    let user = if deictic {
        let frames = deictic_frames(language);
        fill(frames[k % frames.len()], a, b)
    } else {
        let frames = user_frames(language);
        fill(frames[(k + topic + shift) % frames.len()], a, b)
    };
    // The answer's phrasing is independent of the question's, as in real replies.
    let frames = assistant_frames(language);
    let assistant = fill(frames[((k * 7 + topic) / 2 + shift) % frames.len()], b, c);
    Turn { topic, user, assistant, deictic }
}

fn conversation(language: Language, layout: Layout, shift: usize) -> Vec<Turn> {
    match layout {
        Layout::RoundRobin => (0..TURNS_PER_TOPIC)
            .flat_map(|k| (0..TOPICS).map(move |t| topic_turn(language, t, k, false, shift)))
            .collect(),
        Layout::Runs => (0..TOPICS)
            .flat_map(|t| (0..TURNS_PER_TOPIC).map(move |k| topic_turn(language, t, k, k > 0, shift)))
            .collect(),
    }
}

#[derive(Default, Debug)]
struct Exercised {
    switches: usize,
    filtered_selections: usize,
    deictic_continuations: usize,
    budget_limited: usize,
    blocks: usize,
    rounds_with_blocks: usize,
}

/// Runs the agent loop and returns what it exercised; panics on any contamination.
fn run(language: Language, layout: Layout, shift: usize) -> Result<Exercised, Box<dyn std::error::Error>> {
    let _ = env_logger::builder().is_test(true).try_init();
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("hundred-rounds")?;
    let turns = conversation(language, layout, shift);
    let mut seen = Exercised::default();
    for (i, turn) in turns.iter().enumerate() {
        if i > 0 {
            // Every fifth round runs on a tight budget, so the greedy runs out of room.
            let budget = if i % 5 == 0 { Some(60) } else { None };
            let selection =
                session.select_with(&turn.user, &SelectOptions { budget, ..Default::default() })?;
            for block in &selection.blocks {
                let from = turns[block.turn_id as usize].topic;
                assert_eq!(
                    from, turn.topic,
                    "{language:?}/{layout:?}/shift {shift} round {i}: query {:?} (topic {}) selected turn {} of topic {from}: {:?}\n{:#?}",
                    turn.user, turn.topic, block.turn_id, turns[block.turn_id as usize].user, selection
                );
            }
            assert!(selection.budget.used <= selection.budget.limit);
            seen.blocks += selection.blocks.len();
            seen.rounds_with_blocks += usize::from(!selection.blocks.is_empty());
            if selection.decision.topic == Topic::Switch {
                seen.switches += 1;
                if !selection.blocks.is_empty() {
                    seen.filtered_selections += 1;
                }
            }
            if turn.deictic
                && selection.decision.deictic.is_some()
                && selection.decision.topic == Topic::Continue
            {
                seen.deictic_continuations += 1;
            }
            if budget.is_some() && selection.coverage < 0.85 {
                let unlimited = session.select(&turn.user)?;
                if unlimited.coverage > selection.coverage {
                    seen.budget_limited += 1;
                }
            }
        }
        session.add_turn(&turn.user, &turn.assistant)?;
    }
    Ok(seen)
}

/// Each layout runs with three pairings of question and answer phrasing, so a pass is not an
/// accident of which frames happen to meet.
fn check(language: Language, layout: Layout) -> Result<(), Box<dyn std::error::Error>> {
    for shift in 0..3 {
        check_one(language, layout, shift)?;
    }
    Ok(())
}

fn check_one(language: Language, layout: Layout, shift: usize) -> Result<(), Box<dyn std::error::Error>> {
    let seen = run(language, layout, shift)?;
    eprintln!("{language:?}/{layout:?}/shift {shift}: {seen:?}");
    assert!(seen.switches > 0, "no topic switch exercised: {seen:?}");
    assert!(seen.filtered_selections > 0, "content-word filter never applied to a selection: {seen:?}");
    assert!(seen.budget_limited > 0, "budget never exhausted: {seen:?}");
    // Most rounds have on-topic history to find: an empty selection everywhere would be
    // trivially clean.
    assert!(seen.rounds_with_blocks >= 60, "the loop selected too little to prove anything: {seen:?}");
    if matches!(layout, Layout::Runs) {
        assert!(seen.deictic_continuations > 0, "no deictic continuation: {seen:?}");
    }
    Ok(())
}

#[test]
fn english_round_robin() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::English, Layout::RoundRobin)
}

#[test]
fn english_runs() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::English, Layout::Runs)
}

#[test]
fn chinese_round_robin() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::Chinese, Layout::RoundRobin)
}

#[test]
fn chinese_runs() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::Chinese, Layout::Runs)
}

#[test]
fn mixed_round_robin() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::Mixed, Layout::RoundRobin)
}

#[test]
fn mixed_runs() -> Result<(), Box<dyn std::error::Error>> {
    check(Language::Mixed, Layout::Runs)
}
