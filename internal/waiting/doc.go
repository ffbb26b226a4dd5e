// Package waiting is the module's one protocol for waiting on a key in the
// process: a queue of this process's waiters per key, and the loop that
// tries, waits and wakes.
//
// A Queue holds the blocked Acquires of one process per key, in arrival
// order, so that a release wakes one waiter rather than all of them: waking
// all would send them to the database together for one winner.
//
// A waiter joins before its first try, so a release between a refused try
// and the wait is not missed, and calls Rearm before every try, so a wake-up
// that arrives during the try is kept and the try repeated. A waiter that
// leaves without the key passes a wake-up it has not acted on to the next
// one, so it is never lost. Waiters still poll on a timer for releases this
// process does not see.
//
// Run is the one blocking-acquire loop of the module: the strategies that
// wait in the process rather than in the server (tablelock, advisory)
// supply a single try, and Run does the rest.
//
// The protocol, for a blocking acquisition (Spec.Wait):
//
//  1. Join the key's queue (Queue) before the first try, so that a release
//     between a refused try and the wait cannot be missed. A caller that
//     finds others of this process queued lets them go first: its first
//     turn is a wait, not a try, unless it already holds the key (a
//     reentrant acquisition would wait for itself).
//  2. Rearm before every try: a wake-up that arrives during the try is kept,
//     and the next wait returns at once.
//  3. Try. A win leaves the queue and returns. A refusal, or a deadlock or
//     lock-wait refusal from the server, means the key is held: the wake-up
//     that led here is spent. A transient error teaches nothing about the
//     key: a wake-up taken stays unspent. Any other error, or the context
//     ending, leaves the queue and returns; a wake-up not acted on is
//     passed to the next waiter, so none is ever lost.
//  4. Wait for a wake-up, the pause, the context or the Locker closing. The
//     pause: where releases elsewhere wake this process too
//     (Spec.Listening), until the holder's claim ends if the try could tell
//     (a lease expiry), else briefly; otherwise capped exponential backoff
//     with jitter for the head of the queue (capped lower while the
//     refusals name new holders: turned), and the cap for the others,
//     who are woken in turn by releases in this process and poll only for
//     releases elsewhere. With Spec.Line, the head of the queue first
//     waits, once per Run, for its place at the front of the line of every
//     process's waiters, and from there polls from the bottom of the range
//     at each new holder. With Spec.Bound, no wait outlasts the bound: the
//     waiter then looks again, whatever it was waiting for.
//
// A non-blocking acquisition tries once and does not queue.
package waiting
