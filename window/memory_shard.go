package window

import (
	"math"
	"strings"
	"sync"
	"time"
)

// shard holds the ids of one hash range of a Memory. Its entries live in
// one slice; the reserved ones and the confirmed ones are each chained in
// a list ordered by deadline, through indexes, so that adding, moving and
// expiring an entry costs no allocation and no search. Every lease lasts
// the same Lease and every window the same Window, so appending keeps each
// list in order (a clock that steps back cannot break it: see push).
type shard struct {
	mu    sync.Mutex
	index map[string]int32 // stored id → entry
	slots []entry
	free  int32 // first unused entry, chained through next; none when < 0
	held  list  // reserved, by lease deadline
	done  list  // confirmed, by window deadline
	live  int   // entries in held and done
	max   int   // the shard's share of MaxIDs
	next  Token // the next token to issue
	step  Token // tokens of shard i are i + k·step: unique in the Memory

	_ [64]byte // keeps neighbouring shards' locks off this cache line
}

type entry struct {
	id         string
	deadline   int64 // nanoseconds after Memory.base
	token      Token
	prev, next int32
	state      uint8
}

const (
	stateFree uint8 = iota
	stateHeld
	stateDone
)

// list is a list of entries chained through their prev and next; none is
// -1.
type list struct{ head, tail int32 }

func (s *shard) init(i, shards, max int) {
	s.index = make(map[string]int32)
	s.free = -1
	s.held = list{-1, -1}
	s.done = list{-1, -1}
	s.max = max
	s.step = Token(shards)
	s.next = Token(i) + s.step // never zero
}

func (s *shard) reserve(key string, now int64, lease time.Duration) (Status, Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if i, ok := s.index[key]; ok {
		if s.slots[i].state == stateDone {
			return Done, 0, nil
		}
		return InProgress, 0, nil
	}
	if s.live >= s.max {
		return 0, 0, ErrFull
	}
	tok := s.next
	s.next += s.step
	s.add(key, tok, stateHeld, &s.held, after(now, lease))
	return Reserved, tok, nil
}

func (s *shard) confirm(key string, tok Token, now int64, window time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	i, ok := s.index[key]
	if !ok {
		// The lease expired and nobody reserved the id since: the
		// handler succeeded, so the id took effect. Remember it.
		if s.live >= s.max {
			return ErrFull
		}
		s.add(key, tok, stateDone, &s.done, after(now, window))
		return nil
	}
	e := &s.slots[i]
	switch {
	case e.token != tok:
		return ErrNotHeld
	case e.state == stateDone:
		return nil
	}
	s.unlink(&s.held, i)
	e.state = stateDone
	s.push(&s.done, i, after(now, window))
	return nil
}

func (s *shard) release(key string, tok Token, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	i, ok := s.index[key]
	if !ok || s.slots[i].token != tok || s.slots[i].state != stateHeld {
		return ErrNotHeld
	}
	s.remove(&s.held, i)
	return nil
}

func (s *shard) len(now int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	return s.live
}

// expire removes the entries whose deadline is not after now. Both lists
// are in deadline order, so it stops at the first live entry of each.
func (s *shard) expire(now int64) {
	for s.held.head >= 0 && s.slots[s.held.head].deadline <= now {
		s.remove(&s.held, s.held.head)
	}
	for s.done.head >= 0 && s.slots[s.done.head].deadline <= now {
		s.remove(&s.done, s.done.head)
	}
}

// add stores a new entry for key at the end of l.
func (s *shard) add(key string, tok Token, state uint8, l *list, deadline int64) {
	var i int32
	if s.free >= 0 {
		i = s.free
		s.free = s.slots[i].next
	} else {
		s.slots = append(s.slots, entry{})
		i = int32(len(s.slots) - 1)
	}
	id := strings.Clone(key) // the caller's string may share a larger buffer
	s.slots[i] = entry{id: id, token: tok, state: state}
	s.push(l, i, deadline)
	s.index[id] = i
	s.live++
}

// remove forgets entry i, which is in l.
func (s *shard) remove(l *list, i int32) {
	s.unlink(l, i)
	e := &s.slots[i]
	delete(s.index, e.id)
	*e = entry{next: s.free}
	s.free = i
	s.live--
}

// push appends entry i to l with deadline, or with the deadline of l's
// last entry if that is later (when the clock stepped back), so that l
// stays in order.
func (s *shard) push(l *list, i int32, deadline int64) {
	e := &s.slots[i]
	e.prev, e.next = l.tail, -1
	if l.tail >= 0 {
		last := &s.slots[l.tail]
		deadline = max(deadline, last.deadline)
		last.next = i
	} else {
		l.head = i
	}
	e.deadline = deadline
	l.tail = i
}

func (s *shard) unlink(l *list, i int32) {
	e := &s.slots[i]
	if e.prev >= 0 {
		s.slots[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next >= 0 {
		s.slots[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// after returns now + d, saturated.
func after(now int64, d time.Duration) int64 {
	if now > 0 && int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}
