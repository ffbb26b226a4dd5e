// Package telemetry is the one place the module speaks OpenTelemetry: the
// instruments every strategy records on, the spans of Acquire and Release,
// and the attribute names they share (see docs/observability.md).
//
// It depends on the OpenTelemetry API only. Without a provider in the
// options it uses the global ones, which do nothing until the application
// installs an SDK; the attribute sets are built once per Locker so that a
// measurement costs no allocation, and span attributes are only built for a
// span that records.
//
// The package does not import the root package (the root's Do reads a
// lease's span through trace alone), so every package may use it.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/internal/ctxend"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every meter and tracer.
const ScopeName = "github.com/sqllock/sqllock"

// Attribute names, the same in metrics, spans and logs.
const (
	AttrStrategy = "sqllock.strategy" // tablelock, rowlock, optimistic, advisory, jobguard, reaper, fence, semaphore, rwlock, election
	AttrSystem   = "db.system"        // postgresql, mysql, sqlite
	AttrKey      = "sqllock.key"      // metrics only with Options.KeyAttribute
	AttrOutcome  = "sqllock.outcome"  // acquire: acquired, not_acquired, canceled, error
	AttrResult   = "sqllock.result"   // renewal: ok, retried, failed
	AttrCause    = "sqllock.cause"    // loss: expired, taken, session, renewal_failed, closed, other
	AttrToken    = "sqllock.token"
	AttrAttempts = "sqllock.attempts"
	AttrWait     = "sqllock.wait.seconds"
	AttrJob      = "sqllock.job" // jobguard's job name, bounded by the jobs a program declares
)

// Log attribute names beside the ones above: every package logs with
// these, on a logger that carries AttrStrategy and AttrSystem (Logger).
const (
	LogError = "error" // the error's text; for a loss, its full cause
	LogTable = "sqllock.table"
	LogRows  = "sqllock.rows"
)

// Logger returns l with the strategy and db.system attributes every
// record of the package carries. The packages default to a discarding
// logger: quiet unless the application asks.
func Logger(l *slog.Logger, strategy, dialect string) *slog.Logger {
	return l.With(AttrStrategy, strategy, AttrSystem, System(dialect))
}

// Outcomes of an acquisition.
const (
	Acquired    = "acquired"
	NotAcquired = "not_acquired"
	Canceled    = "canceled"
	Failed      = "error"
)

// Renewal results.
const (
	RenewOK      = "ok"
	RenewRetried = "retried"
	RenewFailed  = "failed"
)

// Loss causes: a bounded set, read from the loss message by Cause.
const (
	CauseExpired       = "expired"
	CauseTaken         = "taken"
	CauseSession       = "session"
	CauseRenewalFailed = "renewal_failed"
	CauseClosed        = "closed"
	CauseOther         = "other"
)

var (
	outcomes = []string{Acquired, NotAcquired, Canceled, Failed}
	results  = []string{RenewOK, RenewRetried, RenewFailed}
	causes   = []string{CauseExpired, CauseTaken, CauseSession, CauseRenewalFailed, CauseClosed, CauseOther}
)

// ErrNilProvider: an option was given a nil provider.
var ErrNilProvider = errors.New("nil provider")

// Options is what a constructor's telemetry options set. The zero value
// uses the global providers and keeps keys out of metric attributes.
type Options struct {
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// KeyAttribute adds the key to every metric of a lease (sqllock.key):
	// one time series per key, so only for a few fixed keys.
	KeyAttribute bool
}

// SetMeterProvider is the body of every WithMeterProvider option.
func (o *Options) SetMeterProvider(mp metric.MeterProvider) error {
	if mp == nil {
		return fmt.Errorf("%w: MeterProvider", ErrNilProvider)
	}
	o.MeterProvider = mp
	return nil
}

// SetTracerProvider is the body of every WithTracerProvider option.
func (o *Options) SetTracerProvider(tp trace.TracerProvider) error {
	if tp == nil {
		return fmt.Errorf("%w: TracerProvider", ErrNilProvider)
	}
	o.TracerProvider = tp
	return nil
}

// System maps a dialect name ("postgres", "mariadb", "mysql", "sqlite") to
// the value of db.system. Both MySQL-family paths report "mysql", as they
// did before the dialects were renamed, so dashboards keep matching.
func System(dialect string) string {
	switch dialect {
	case "postgres":
		return "postgresql"
	case "mariadb": // MariaDB's own path
		return "mysql"
	}
	return dialect
}

// T is one user's instruments (a Locker, a Guard, a Reaper, a Fence) with
// its fixed attributes. Safe for concurrent use.
type T struct {
	strategy string
	keyAttr  bool
	base     []attribute.KeyValue
	common   attrs

	acquireDur metric.Float64Histogram
	heldDur    metric.Float64Histogram
	active     metric.Int64UpDownCounter
	renewals   metric.Int64Counter
	lost       metric.Int64Counter
	waiters    metric.Int64UpDownCounter
	fenceRej   metric.Int64Counter
	forced     metric.Int64Counter
	reaped     metric.Int64Counter
	conflicts  metric.Int64Counter
	jobRuns    metric.Int64Counter
	jobSkipped metric.Int64Counter
	jobDur     metric.Float64Histogram

	byOutcome map[string]attrs
	byResult  map[string]attrs
	byCause   map[string]attrs

	tracer trace.Tracer                // from Options; nil: the global provider's
	cached atomic.Pointer[tracerCache] // the global provider's tracer
}

// tracerCache is the tracer of one global TracerProvider.
type tracerCache struct {
	tp trace.TracerProvider
	tr trace.Tracer
}

// unset is the global TracerProvider before the application installs one.
// While it is still installed spans are skipped outright: its spans would
// record nothing, and each costs allocations.
var unset = otel.GetTracerProvider()

// start begins a span named name under ctx, or returns ctx and a no-op span
// when tracing is off.
func (t *T) start(ctx context.Context, name string) (context.Context, trace.Span) {
	tr := t.tracer
	if tr == nil {
		tp := otel.GetTracerProvider()
		if tp == unset {
			return ctx, noSpan
		}
		c := t.cached.Load()
		if c == nil || c.tp != tp {
			c = &tracerCache{tp: tp, tr: tp.Tracer(ScopeName)}
			t.cached.Store(c)
		}
		tr = c.tr
	}
	return tr.Start(ctx, name)
}

// noSpan is the span of an operation that is not traced.
var noSpan = trace.SpanFromContext(context.Background())

// durations: lock waits and holds run from a millisecond to minutes.
var durations = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// New builds the instruments of strategy on the database dialect names
// ("postgres", "mariadb", "mysql", "sqlite").
func New(strategy, dialect string, o Options) *T {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	t := &T{
		strategy: strategy,
		keyAttr:  o.KeyAttribute,
		base: []attribute.KeyValue{
			attribute.String(AttrStrategy, strategy),
			attribute.String(AttrSystem, System(dialect)),
		},
	}
	if o.TracerProvider != nil {
		t.tracer = o.TracerProvider.Tracer(ScopeName)
	}
	t.common = newAttrs(t.base)
	t.byOutcome = t.sets(AttrOutcome, outcomes)
	t.byResult = t.sets(AttrResult, results)
	t.byCause = t.sets(AttrCause, causes)

	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durations...))
		handle(err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		handle(err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		handle(err)
		return c
	}
	t.acquireDur = hist("sqllock.acquire.duration", "Time an Acquire or TryAcquire took, by outcome.")
	t.heldDur = hist("sqllock.lease.held.duration", "Time a lease was held, from grant to release or loss.")
	t.active = gauge("sqllock.lease.active", "{lease}", "Leases held by this process now.")
	t.renewals = count("sqllock.lease.renewals", "{renewal}", "Lease renewals, by result.")
	t.lost = count("sqllock.lease.lost", "{lease}", "Leases that ended without Release, by cause.")
	t.waiters = gauge("sqllock.waiters", "{call}", "Blocking Acquire calls of this process in progress.")
	t.fenceRej = count("sqllock.fence.rejected", "{write}", "Fenced writes refused for a stale token.")
	t.forced = count("sqllock.lock.force_released", "{lock}", "Locks freed by ForceRelease.")
	t.reaped = count("sqllock.reaper.reaped", "{row}", "Expired lock rows deleted by the reaper.")
	t.conflicts = count("sqllock.optimistic.conflicts", "{conflict}", "Optimistic writes that found the version moved.")
	t.jobRuns = count("sqllock.jobguard.runs", "{run}", "Jobs run by this process.")
	t.jobSkipped = count("sqllock.jobguard.skipped", "{run}", "Job firings skipped: another replica held or had run the job.")
	t.jobDur = hist("sqllock.jobguard.duration", "Time a job ran.")
	return t
}

// handle reports an instrument that could not be made, as the API asks;
// the instrument returned with the error still works (as a no-op).
func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// attrs is one attribute set as the option slices the instruments take:
// built once, passed as is, so a measurement allocates nothing.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(kv []attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// sets is one attribute set per value of name, over the fixed attributes.
func (t *T) sets(name string, values []string) map[string]attrs {
	m := make(map[string]attrs, len(values))
	for _, v := range values {
		m[v] = newAttrs(append(append([]attribute.KeyValue(nil), t.base...), attribute.String(name, v)))
	}
	return m
}

// opt is the attributes of a measurement: the prebuilt ones, or ones with
// the key when the user opted in.
func (t *T) opt(pre attrs, key string, extra ...attribute.KeyValue) attrs {
	if !t.keyAttr || key == "" {
		return pre
	}
	kv := make([]attribute.KeyValue, 0, len(t.base)+len(extra)+1)
	return newAttrs(append(append(append(kv, t.base...), extra...), attribute.String(AttrKey, key)))
}

// Strategy returns the strategy name the instruments carry.
func (t *T) Strategy() string { return t.strategy }

// callerKey marks a context made by StartAcquire: its value is the
// caller's context.
type callerKey struct{}

// withinKey marks a context made by Within; its value is a within.
type withinKey struct{}

type within struct {
	t   *T
	key string
}

// Within returns ctx for the acquisitions a primitive built on a Locker
// (semaphore, rwlock, election) makes for one call of its own, which it
// records itself, once: they record no acquisition and no waiter, and a
// lease granted under ctx records on t under the caller's key, or nowhere
// when t is nil (a row held only on the way to the call's hold).
func Within(ctx context.Context, t *T, key string) context.Context {
	return context.WithValue(ctx, withinKey{}, within{t, key})
}

// For returns the instruments and key a lease of key granted under ctx
// records on: t and key, or the primitive's given to Within (a nil T:
// none).
func (t *T) For(ctx context.Context, key string) (*T, string) {
	if w, ok := ctx.Value(withinKey{}).(within); ok {
		return w.t, w.key
	}
	return t, key
}

// Acquisition is one Acquire or TryAcquire in progress: a value, so that
// an acquisition with telemetry off allocates nothing.
type Acquisition struct {
	t     *T
	key   string
	start time.Time
	wait  bool
	span  trace.Span
}

// StartAcquire begins an acquisition of key; wait: it blocks (Acquire).
// The returned context carries the acquire span, for the statements the
// strategy runs.
func (t *T) StartAcquire(ctx context.Context, key string, wait bool) (context.Context, Acquisition) {
	if _, ok := ctx.Value(withinKey{}).(within); ok {
		return ctx, Acquisition{} // a primitive's, which records the call
	}
	a := Acquisition{t: t, key: key, start: time.Now(), wait: wait}
	parent := ctx
	ctx, a.span = t.start(ctx, "sqllock.acquire")
	if a.span.IsRecording() {
		// The lease span started inside this context is a sibling of the
		// acquire span, under the caller's.
		ctx = context.WithValue(ctx, callerKey{}, parent)
		a.span.SetAttributes(t.base...)
		a.span.SetAttributes(attribute.String(AttrKey, key), attribute.Bool("sqllock.wait", wait))
	}
	if wait {
		t.waiters.Add(ctx, 1, t.opt(t.common, key).add...)
	}
	return ctx, a
}

// Outcome classifies an acquisition's error: canceled when ctx ended it,
// not_acquired for a refusal (notAcquired reports one), error otherwise.
func Outcome(ctx context.Context, err error, notAcquired func(error) bool) string {
	switch {
	case err == nil:
		return Acquired
	case ctxend.Err(ctx) != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return Canceled
	case notAcquired(err):
		return NotAcquired
	}
	return Failed
}

// End records the acquisition: outcome (see Outcome), the token won (when
// acquired) and the tries made (0 when the strategy does not count them).
func (a Acquisition) End(ctx context.Context, outcome string, token int64, attempts int, err error) {
	t := a.t
	if t == nil {
		return
	}
	d := time.Since(a.start).Seconds()
	t.acquireDur.Record(ctx, d, t.opt(t.byOutcome[outcome], a.key, attribute.String(AttrOutcome, outcome)).rec...)
	if a.wait {
		t.waiters.Add(ctx, -1, t.opt(t.common, a.key).add...)
	}
	if a.span.IsRecording() {
		a.span.SetAttributes(attribute.String(AttrOutcome, outcome), attribute.Float64(AttrWait, d))
		if outcome == Acquired {
			a.span.SetAttributes(attribute.Int64(AttrToken, token))
		}
		if attempts > 0 {
			a.span.SetAttributes(attribute.Int(AttrAttempts, attempts))
		}
		if outcome == Failed {
			a.span.RecordError(err)
			a.span.SetStatus(codes.Error, err.Error())
		}
	}
	a.span.End()
}

// Held is the telemetry of one lease from its grant: it keeps the lease's
// span, which Do makes the parent of the work. The zero Held records
// nothing.
type Held struct {
	t     *T
	key   string
	start time.Time
	span  trace.Span
}

// StartLease records a granted lease of key under token; ctx is the
// caller's (the lease span is its child).
func (t *T) StartLease(ctx context.Context, key string, token int64) Held {
	h := Held{t: t, key: key, start: time.Now()}
	if parent, ok := ctx.Value(callerKey{}).(context.Context); ok {
		ctx = parent
	}
	_, h.span = t.start(ctx, "sqllock.lease")
	if h.span.IsRecording() {
		h.span.SetAttributes(t.base...)
		h.span.SetAttributes(attribute.String(AttrKey, key), attribute.Int64(AttrToken, token))
	}
	t.active.Add(ctx, 1, t.opt(t.common, key).add...)
	return h
}

// SpanContext is the lease span's, for Do to parent the work on.
func (h *Held) SpanContext() trace.SpanContext {
	if h.span == nil {
		return trace.SpanContext{}
	}
	return h.span.SpanContext()
}

// End records the end of the lease: lost with cause (one of the Cause
// values), or released when cause is "".
func (h *Held) End(cause string) {
	if h.t == nil {
		return
	}
	t, ctx := h.t, context.Background()
	t.heldDur.Record(ctx, time.Since(h.start).Seconds(), t.opt(t.common, h.key).rec...)
	t.active.Add(ctx, -1, t.opt(t.common, h.key).add...)
	if cause != "" {
		t.lost.Add(ctx, 1, t.opt(t.byCause[cause], h.key, attribute.String(AttrCause, cause)).add...)
		if h.span.IsRecording() {
			h.span.SetAttributes(attribute.String(AttrCause, cause))
			h.span.SetStatus(codes.Error, "lease lost: "+cause)
		}
	}
	h.span.End()
}

// Drop undoes StartLease for a lease never handed out (its Locker closed
// while it was taken): no hold to record.
func (h *Held) Drop() {
	if h.t == nil {
		return
	}
	h.t.active.Add(context.Background(), -1, h.t.opt(h.t.common, h.key).add...)
	h.span.End()
}

// Event adds an event to the lease span (a failed renewal, a retry): the
// background work of a lease makes no spans of its own.
func (h *Held) Event(name string, err error) {
	if h.span == nil || !h.span.IsRecording() {
		return
	}
	if err != nil {
		h.span.AddEvent(name, trace.WithAttributes(attribute.String("error", err.Error())))
		return
	}
	h.span.AddEvent(name)
}

// StartRelease begins the span of a Release of a lease on key.
func (t *T) StartRelease(ctx context.Context, key string, token int64) (context.Context, trace.Span) {
	ctx, sp := t.start(ctx, "sqllock.release")
	if sp.IsRecording() {
		sp.SetAttributes(t.base...)
		sp.SetAttributes(attribute.String(AttrKey, key), attribute.Int64(AttrToken, token))
	}
	return ctx, sp
}

// EndSpan ends sp, marking it failed with err unless err is nil.
func EndSpan(sp trace.Span, err error) {
	if err != nil && sp.IsRecording() {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// Renewal counts one renewal of a lease on key with result; on a nil T
// (a lease For gave none) it records nothing.
func (t *T) Renewal(key, result string) {
	if t == nil {
		return
	}
	t.renewals.Add(context.Background(), 1, t.opt(t.byResult[result], key, attribute.String(AttrResult, result)).add...)
}

// ForceReleased counts a lock on key freed by an operator.
func (t *T) ForceReleased(ctx context.Context, key string) {
	t.forced.Add(ctx, 1, t.opt(t.common, key).add...)
}

// Reaped counts n rows deleted by a sweep.
func (t *T) Reaped(ctx context.Context, n int64) {
	if n > 0 {
		t.reaped.Add(ctx, n, t.common.add...)
	}
}

// FenceRejected counts a fenced write refused on resource (the key
// attribute, when opted in, is the resource).
func (t *T) FenceRejected(ctx context.Context, resource string) {
	t.fenceRej.Add(ctx, 1, t.opt(t.common, resource).add...)
}

// Conflict counts an optimistic write that found the version moved on key.
func (t *T) Conflict(ctx context.Context, key string) {
	t.conflicts.Add(ctx, 1, t.opt(t.common, key).add...)
}

// JobRan records a run of job that took d.
func (t *T) JobRan(ctx context.Context, job string, d time.Duration) {
	o := newAttrs(append(append([]attribute.KeyValue(nil), t.base...), attribute.String(AttrJob, job)))
	t.jobRuns.Add(ctx, 1, o.add...)
	t.jobDur.Record(ctx, d.Seconds(), o.rec...)
}

// JobSkipped records a firing of job that did not run.
func (t *T) JobSkipped(ctx context.Context, job string) {
	o := newAttrs(append(append([]attribute.KeyValue(nil), t.base...), attribute.String(AttrJob, job)))
	t.jobSkipped.Add(ctx, 1, o.add...)
}

// Cause maps a loss message to its bounded cause. Every strategy words its
// losses in the lease kernel's Lost; these are the words it uses.
func Cause(msg string) string {
	switch {
	case strings.Contains(msg, "Locker was closed"):
		return CauseClosed
	case strings.Contains(msg, "no longer"), strings.Contains(msg, "moved"), strings.Contains(msg, "taken"), strings.Contains(msg, "did not hold"):
		return CauseTaken
	case strings.Contains(msg, "renewal failed"), strings.Contains(msg, "keep-alive failed"):
		return CauseRenewalFailed
	case strings.Contains(msg, "safety margin"), strings.Contains(msg, "hold-at-most"):
		return CauseExpired
	case strings.Contains(msg, "session"), strings.Contains(msg, "transaction"), strings.Contains(msg, "ran longer"):
		return CauseSession
	}
	return CauseOther
}
