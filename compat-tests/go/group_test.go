// franz-go against the broker at $KAFKA_BOOTSTRAP (run.sh starts one and sets it):
// the default producer (idempotent, acks=all) and a two-member consumer group with
// manual commits, then a fresh member of the same group that must find nothing left.
package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 4
	records    = 20000
)

func bootstrap(t *testing.T) string {
	b := os.Getenv("KAFKA_BOOTSTRAP")
	if b == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set; run compat-tests/go/run.sh, which starts a broker")
	}
	return b
}

// waitFor polls cond every 50 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type position struct {
	partition int32
	offset    int64
}

// member is one group consumer: a kgo client in ConsumerGroup mode with autocommit off,
// polling in its own goroutine and committing after every non-empty poll and on revoke.
type member struct {
	name string
	cl   *kgo.Client

	mu         sync.Mutex
	assigned   map[int32]bool
	got        map[position]string // value by position
	deliveries int
	errs       []string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newMember(t *testing.T, name, seed, group, topic string) *member {
	m := &member{name: name, assigned: map[int32]bool{}, got: map[position]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seed),
		kgo.ClientID("compat-"+name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				m.addErr("commit on revoke: %v", err)
			}
			m.drop(r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.drop(l[topic])
		}),
	)
	if err != nil {
		t.Fatalf("%s: NewClient: %v", name, err)
	}
	m.cl = cl
	go m.run()
	return m
}

func (m *member) addErr(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, fmt.Sprintf(format, args...))
}

func (m *member) drop(parts []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range parts {
		delete(m.assigned, p)
	}
}

func (m *member) run() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := m.cl.PollFetches(ctx)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				m.addErr("fetch %s/%d: %v", topic, p, err)
			}
		})
		n := 0
		m.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			m.got[position{r.Partition, r.Offset}] = string(r.Value)
			m.deliveries++
			n++
		})
		m.mu.Unlock()
		if n > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
				m.addErr("commit: %v", err)
			}
			cancel()
		}
	}
}

// close stops polling, commits what is left and leaves the group; only the first call acts.
func (m *member) close(t *testing.T) {
	m.closeOnce.Do(func() {
		close(m.stop)
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: poll loop did not stop within 30s", m.name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			m.addErr("final commit: %v", err)
		}
		m.cl.Close() // LeaveGroup
	})
}

func (m *member) snapshot() (assigned []int32, deliveries int, errs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.assigned {
		assigned = append(assigned, p)
	}
	sort.Slice(assigned, func(i, j int) bool { return assigned[i] < assigned[j] })
	return assigned, m.deliveries, append([]string(nil), m.errs...)
}

// ownedOnce: every partition of the topic is assigned to exactly one of the members.
func ownedOnce(ms ...*member) bool {
	seen := map[int32]int{}
	for _, m := range ms {
		a, _, _ := m.snapshot()
		if len(a) == 0 {
			return false
		}
		for _, p := range a {
			seen[p]++
		}
	}
	if len(seen) != partitions {
		return false
	}
	for _, n := range seen {
		if n != 1 {
			return false
		}
	}
	return true
}

func describe(ms ...*member) string {
	s := ""
	for _, m := range ms {
		a, n, errs := m.snapshot()
		s += fmt.Sprintf("[%s: assigned %v, %d records, errors %v] ", m.name, a, n, errs)
	}
	return s
}

func TestIdempotentProducerAndConsumerGroup(t *testing.T) {
	seed := bootstrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "franz-"+suffix, "franz-g-"+suffix

	admCl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}

	// Two members; wait until they share the partitions before producing.
	m1 := newMember(t, "member1", seed, group, topic)
	m2 := newMember(t, "member2", seed, group, topic)
	defer m1.close(t)
	defer m2.close(t)
	waitFor(t, 60*time.Second, func() bool { return ownedOnce(m1, m2) },
		func() string { return "the two members do not share the partitions: " + describe(m1, m2) })

	// The default producer: idempotent, acks=all.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	var pmu sync.Mutex
	produced := map[position]string{}
	var produceErrs []string
	noPID := 0
	pids := map[int64]bool{}
	for i := 0; i < records; i++ {
		r := &kgo.Record{Key: []byte("key-" + strconv.Itoa(i%997)), Value: []byte(strconv.Itoa(i))}
		prod.Produce(ctx, r, func(r *kgo.Record, err error) {
			pmu.Lock()
			defer pmu.Unlock()
			if err != nil {
				produceErrs = append(produceErrs, err.Error())
				return
			}
			if r.ProducerID < 0 { // franz-go produces with id -1 when it could not get one
				noPID++
			}
			pids[r.ProducerID] = true
			produced[position{r.Partition, r.Offset}] = string(r.Value)
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	prod.Close()
	if len(produceErrs) > 0 {
		t.Fatalf("%d produce errors, first: %s", len(produceErrs), produceErrs[0])
	}
	if len(produced) != records {
		t.Fatalf("%d distinct acknowledged positions for %d records", len(produced), records)
	}
	if noPID > 0 || len(pids) != 1 {
		t.Fatalf("%d records were produced without a producer id (not idempotent); producer ids %v",
			noPID, pids)
	}
	t.Logf("%d records produced with producer id %v", records, pids)

	total := func() int {
		_, a, _ := m1.snapshot()
		_, b, _ := m2.snapshot()
		return a + b
	}
	waitFor(t, 90*time.Second, func() bool { return total() >= records },
		func() string { return fmt.Sprintf("%d of %d consumed: %s", total(), records, describe(m1, m2)) })
	time.Sleep(time.Second) // anything more would be a duplicate
	m1.close(t)
	m2.close(t)

	t.Logf("%s", describe(m1, m2))
	for _, m := range []*member{m1, m2} {
		_, n, errs := m.snapshot()
		if len(errs) > 0 {
			t.Errorf("%s: errors %v", m.name, errs)
		}
		if n == 0 {
			t.Errorf("%s consumed nothing", m.name)
		}
	}
	if got := total(); got != records {
		t.Errorf("%d deliveries for %d records (duplicates without a rebalance)", got, records)
	}
	consumed := map[position]string{}
	for _, m := range []*member{m1, m2} {
		for pos, v := range m.got {
			consumed[pos] = v
		}
	}
	missing := 0
	for pos, v := range produced {
		if consumed[pos] != v {
			missing++
		}
	}
	if missing > 0 || len(consumed) != len(produced) {
		t.Fatalf("%d acknowledged records not consumed with their value; %d positions consumed, %d produced",
			missing, len(consumed), len(produced))
	}

	// The committed offsets are the log end offsets.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("ListEndOffsets: %v %v", err, ends.Error())
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil || committed.Error() != nil {
		t.Fatalf("FetchOffsets: %v %v", err, committed.Error())
	}
	endAt := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		e, _ := ends.Lookup(topic, p)
		c, ok := committed.Lookup(topic, p)
		if !ok || c.At != e.Offset {
			t.Fatalf("partition %d: committed %v (found %v), log end %d", p, c.At, ok, e.Offset)
		}
		endAt[p] = e.Offset
	}

	// A fresh member of the group finds nothing left...
	m3 := newMember(t, "member3", seed, group, topic)
	defer m3.close(t)
	waitFor(t, 60*time.Second, func() bool { a, _, _ := m3.snapshot(); return len(a) == partitions },
		func() string { return "the fresh member did not get every partition: " + describe(m3) })
	time.Sleep(3 * time.Second)
	if _, n, errs := m3.snapshot(); n != 0 || len(errs) > 0 {
		t.Fatalf("the fresh member consumed %d records (errors %v); the group had committed everything", n, errs)
	}
	// ...and is positioned at the committed offsets: one new record per partition arrives.
	marker, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		if err := marker.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("marker")}).FirstErr(); err != nil {
			t.Fatalf("marker produce: %v", err)
		}
	}
	marker.Close()
	waitFor(t, 30*time.Second, func() bool { _, n, _ := m3.snapshot(); return n >= partitions },
		func() string { return "the markers did not arrive: " + describe(m3) })
	time.Sleep(500 * time.Millisecond)
	m3.close(t)
	want := map[position]string{}
	for p := int32(0); p < partitions; p++ {
		want[position{p, endAt[p]}] = "marker"
	}
	if !reflect.DeepEqual(m3.got, want) {
		t.Fatalf("the fresh member got %v, want only the markers at the committed offsets %v", m3.got, want)
	}
	if _, _, errs := m3.snapshot(); len(errs) > 0 {
		t.Fatalf("member3 errors: %v", errs)
	}
}
