//! The shared phrasing: sentence templates every topic fills with its own vocabulary.
//!
//! A template names slots in braces (`{err}`, `{zfix}`, ...; see [`crate::topics`]); `{n}` is a
//! number. Opening sentences state a problem, follow-ups add detail or react to the previous
//! answer; assistant sentences explain, suggest and show code. Templates are the same for every
//! topic, which gives generic words (`problem`, `suggest`, `请问一下`, `怎么解决`) a high document
//! frequency, as in real logs.

/// First sentence of a user message that opens or continues a topic, English.
pub(crate) const USER_OPEN_EN: &[&str] = &[
    "I'm getting `{err}` when I run {cmd} against {ver}, and I have no idea where to start looking.",
    "How do I configure {kw} so that {id} stops failing in {path} after every deploy?",
    "Our {kw} setup keeps failing with {err} in production, and on top of that {sym}.",
    "Is there a clean way to make {id} handle {kw} correctly on {ver} without rewriting the service?",
    "We upgraded to {ver} last week and now {sym}, which never happened before.",
    "Can you explain why {sym} with {kw} in our payment service?",
    "The logs in {path} show {err} roughly every {n} seconds since yesterday's deploy.",
    "Problem: {sym}, and the only clue is {err} in the application logs.",
    "Quick question about {kw}: should {id} be configured in {path} or passed at runtime?",
    "Here is what we have right now: {code} and still {sym}.",
    "I keep running into the same {kw} problem in staging and production: {sym}.",
    "Does anyone know why {id} throws {err} after a restart of the worker?",
];

/// Further sentences of a user message, English.
pub(crate) const USER_MORE_EN: &[&str] = &[
    "I already tried to {fix}, but the problem is still there.",
    "This is on {ver}, running in Kubernetes with three replicas behind a load balancer.",
    "The relevant code is {code}.",
    "It only happens under load, around {n} requests per second, never on my laptop.",
    "Running {cmd} shows nothing unusual, the output looks the same as last month.",
    "The config lives in {path} if that matters, and {id} is set there.",
    "Any suggestion is welcome, this is blocking our release and the team is waiting.",
    "It worked fine before we touched {id} in {path}.",
    "Also, is {kw} even the right tool for this kind of workload?",
    "Thanks in advance, I've been stuck on this for two days and searched every issue tracker.",
];

/// First sentence of a user follow-up on the same topic, English.
pub(crate) const USER_FOLLOW_EN: &[&str] = &[
    "That helped, but now {sym}.",
    "I tried that and it still fails with {err} in the same place.",
    "OK, and what about {kw} when {sym}?",
    "Thanks. One more thing: {id} sometimes returns {err} during startup.",
    "Makes sense. Should I also change {id} in {path} to match?",
    "After the change, {cmd} prints {err} again.",
    "Would it be better to {fix} instead of patching {id}?",
    "Does that advice still apply on {ver}, or did the behaviour change?",
];

/// Assistant sentences, English.
pub(crate) const ASSISTANT_EN: &[&str] = &[
    "The `{err}` error usually means {cause}, which fits what you see in {path}.",
    "I would {fix}; that addresses the root cause instead of hiding the symptom behind retries.",
    "In {ver} the default behaviour of {id} changed, so {cause}, and older guides on {kw} are misleading.",
    "Check {path} and make sure {id} is set explicitly rather than left at its default value.",
    "Something like this should work: {code}",
    "After that, run {cmd} to verify the fix in staging before you deploy it to production again.",
    "This is a known problem with {kw} when {sym}, and the usual reason is that {cause}.",
    "Keep in mind that {kw} is not free: every call to {id} adds latency, memory and another failure mode.",
    "If that does not help, enable debug logging and share the output of {cmd} together with {path}.",
    "The root cause is most likely that {cause}, so I suggest you {fix}.",
    "A second option is to {fix}, which is simpler to roll out but less robust under heavy load.",
    "You can confirm the diagnosis with {cmd}: if {sym}, the timestamps will line up with {err}.",
    "Don't change {id} and the {kw} settings in the same deploy, or you won't know which change fixed it.",
    "For reference, the relevant snippet is {code}, and {id} should be configured right before it.",
    "Also write a regression test around {id} that reproduces {err}, so the problem cannot come back silently.",
    "Monitoring helps here too: alert when {sym}, because users notice it long before {path} shows anything.",
];

/// First sentence of a user message that opens or continues a topic, Chinese.
pub(crate) const USER_OPEN_ZH: &[&str] = &[
    "请问一下，{zkw}的时候一直报 {err}，怎么解决？",
    "我们用的是 {ver}，现在{zsym}，有什么建议吗？",
    "{zkw}这块应该怎么设计比较好？现在{zsym}。",
    "跑 {cmd} 的时候报错：{err}，是哪里配置有问题？",
    "{path} 里面的 {id} 是不是配置错了？线上{zsym}。",
    "遇到一个{zkw}的问题：{zsym}，日志里只有 {err}。",
    "升级到 {ver} 之后{zsym}，之前一直好好的。",
    "想请教一下{zkw}的最佳实践，我们现在的写法是 {code}。",
    "生产环境{zsym}，排查了半天没有头绪。",
];

/// Further sentences of a user message, Chinese.
pub(crate) const USER_MORE_ZH: &[&str] = &[
    "试过{zfix}，但是问题还在。",
    "代码大概是这样：{code}",
    "配置在 {path} 里面。",
    "压测的时候大概每秒 {n} 个请求就会出现。",
    "用 {cmd} 看了一下，没发现什么异常。",
    "这个问题比较急，麻烦帮忙看一下。",
    "之前改过 {id}，不知道有没有关系。",
];

/// First sentence of a user follow-up on the same topic, Chinese.
pub(crate) const USER_FOLLOW_ZH: &[&str] = &[
    "还是不行，日志里还是 {err}。",
    "那如果{zsym}呢？",
    "明白了，那 {id} 要怎么改？",
    "按照你说的改了，现在{zsym}。",
    "这样改的话 {ver} 也适用吗？",
    "有没有办法不改代码，只改 {path} 里的配置？",
    "另外{zkw}这块还有什么需要注意的？",
];

/// Assistant sentences, Chinese.
pub(crate) const ASSISTANT_ZH: &[&str] = &[
    "这个错误一般是因为{zcause}。",
    "建议{zfix}，这样可以从根本上解决问题。",
    "可以先检查一下 {path} 里的 {id} 配置，确认没有用默认值。",
    "在 {ver} 里 {id} 的默认行为变了，所以{zcause}。",
    "参考下面的写法：{code}",
    "改完之后用 {cmd} 验证一下，再发布到生产环境。",
    "{zkw}本身不复杂，关键是{zfix}。",
    "如果还是有问题，把 {cmd} 的输出和完整的报错 {err} 贴出来看看。",
    "从你描述的现象看，{zsym}基本可以确定是{zcause}。",
    "另一个办法是{zfix}，实现简单一些，但是高并发下不够稳。",
    "注意不要在同一次发布里同时改 {id} 和{zkw}相关的配置，否则不好定位。",
];

/// Follow-up questions for `query_for`, English.
pub(crate) const QUERY_EN: &[&str] = &[
    "How do I fix {err} with {kw}?",
    "What was the suggested fix for {id} again?",
    "What should I do when {sym}?",
    "Why does {kw} fail with {err} on {ver}?",
    "Which setting in {path} controls {id}?",
    "Is it safe to {fix}?",
    "Can you remind me how to check {kw} with {cmd}?",
];

/// Follow-up questions for `query_for`, Chinese.
pub(crate) const QUERY_ZH: &[&str] = &[
    "{zkw}报 {err} 怎么解决？",
    "之前说的 {id} 要怎么配置？",
    "{zsym}的话应该怎么办？",
    "请问一下{zkw}的问题最后是怎么解决的？",
    "{path} 里的 {id} 应该改成多少？",
    "为什么{zsym}？",
];

/// Numbers for `{n}`.
pub(crate) const NUMBERS: &[&str] = &["5", "30", "50", "200", "500", "1000", "3000", "10000"];
