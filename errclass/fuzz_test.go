package errclass_test

// FuzzClassify builds an arbitrary error tree — errors.Join, %w chains (one
// or several %w), markers on markers, errors with a Permanent() bool
// method, nils — and an arbitrary chain of classifiers from the fuzzer's
// bytes, then checks the classification against an independent model of
// the documented rule: the first marker met in errors.Is order (the error
// itself, then depth-first through its Unwrap tree) decides; [Default]
// retries anything else, nil included. It also checks that nothing panics,
// that classifying twice gives the same answer, that markers of nil are nil,
// that markers keep their cause reachable, and that a Chain answers its
// first link's answer that is not Unknown.
//
//	go test ./errclass -run '^$' -fuzz FuzzClassify -fuzztime 1m

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/resumable-go/resumable/errclass"
)

// fzMaxOps bounds a program: the tree is then at most fzMaxOps deep, below
// the depth at which errclass stops walking an error tree (100), so that
// the model and the package agree on what "first marker" means.
const fzMaxOps = 90

var (
	errFzA = errors.New("fuzz: a")
	errFzB = errors.New("fuzz: b")
	errFzC = errors.New("fuzz: c")
)

// fzFinal says whether it is final with a Permanent() bool method and
// wraps nothing.
type fzFinal struct{ final bool }

func (e fzFinal) Error() string   { return fmt.Sprintf("fuzz: final=%v", e.final) }
func (e fzFinal) Permanent() bool { return e.final }

// fzFinalWrap has a Permanent() bool method and wraps an error.
type fzFinalWrap struct {
	final bool
	err   error
}

func (e *fzFinalWrap) Error() string   { return fmt.Sprintf("fuzz: final=%v: %v", e.final, e.err) }
func (e *fzFinalWrap) Permanent() bool { return e.final }
func (e *fzFinalWrap) Unwrap() error   { return e.err }

// fzIs claims to be errFzA through an Is method and wraps an error: it is
// not a marker, whatever it matches.
type fzIs struct{ err error }

func (e *fzIs) Error() string        { return "fuzz: is a: " + fmt.Sprint(e.err) }
func (e *fzIs) Is(target error) bool { return target == errFzA }
func (e *fzIs) Unwrap() error        { return e.err }

// fzNode models one error of the tree: what it decides by itself, and the
// errors it unwraps to, in order.
type fzNode struct {
	decides  bool // a marker, or a Permanent() bool that says true
	decision errclass.Decision
	expired  bool          // an errclass.CursorExpired marker
	after    time.Duration // for a RetryAfter marker
	isRetry  bool          // an errclass.RetryAfter marker
	children []*fzNode
}

// fzItem is an error and its model; both nil for a nil error.
type fzItem struct {
	err  error
	node *fzNode
}

// fzBuild runs prog, a little stack machine, and returns the error on top
// of the stack (nil for an empty stack) with its model. Each check that
// can be made while building (markers of nil are nil; markers keep their
// cause) is made here.
func fzBuild(t *testing.T, prog []byte) fzItem {
	if len(prog) > fzMaxOps {
		prog = prog[:fzMaxOps]
	}
	var stack []fzItem
	pop := func() fzItem {
		if len(stack) == 0 {
			return fzItem{}
		}
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return it
	}
	push := func(it fzItem) { stack = append(stack, it) }
	arg := func(i *int) byte {
		if *i+1 < len(prog) {
			*i++
			return prog[*i]
		}
		return 0
	}
	leaf := func(err error) fzItem { return fzItem{err: err, node: &fzNode{}} }
	marked := func(inner fzItem, err error, n *fzNode, name string) fzItem {
		if inner.err == nil {
			if err != nil {
				t.Fatalf("%s(nil) = %v, want nil", name, err)
			}
			return fzItem{}
		}
		if !errors.Is(err, inner.err) {
			t.Fatalf("errors.Is(%s(%v), %v) = false: the marker hides its cause", name, inner.err, inner.err)
		}
		n.children = []*fzNode{inner.node}
		return fzItem{err: err, node: n}
	}
	join := func(items ...fzItem) fzItem {
		var errs []error
		n := &fzNode{}
		for _, it := range items {
			if it.err != nil {
				errs = append(errs, it.err)
				n.children = append(n.children, it.node)
			}
		}
		err := errors.Join(errs...)
		if err == nil {
			return fzItem{}
		}
		return fzItem{err: err, node: n}
	}
	for i := 0; i < len(prog); i++ {
		switch op := prog[i] % 15; op {
		case 0:
			push(leaf([]error{errFzA, errFzB, errFzC}[arg(&i)%3]))
		case 1:
			push(leaf(io.EOF))
		case 2:
			push(fzItem{err: fzFinal{final: true}, node: &fzNode{decides: true, decision: errclass.Decision{Action: errclass.Fail}}})
		case 3:
			push(leaf(fzFinal{final: false}))
		case 4:
			in := pop()
			push(marked(in, errclass.Permanent(in.err), &fzNode{decides: true, decision: errclass.Decision{Action: errclass.Fail}}, "Permanent"))
		case 5:
			in := pop()
			d := time.Duration(int8(arg(&i))) * time.Millisecond // negative too
			want := max(d, 0)
			push(marked(in, errclass.RetryAfter(in.err, d),
				&fzNode{decides: true, decision: errclass.Decision{Action: errclass.Retry, After: want}, isRetry: true, after: want}, "RetryAfter"))
		case 6:
			in := pop()
			push(marked(in, errclass.CursorExpired(in.err), &fzNode{decides: true, decision: errclass.Decision{Action: errclass.Expired}, expired: true}, "CursorExpired"))
		case 7:
			in := pop()
			if in.err == nil { // fmt makes a plain error of a nil %w operand
				push(leaf(fmt.Errorf("fuzz: wrap: %w", nil)))
				break
			}
			push(fzItem{err: fmt.Errorf("fuzz: wrap: %w", in.err), node: &fzNode{children: []*fzNode{in.node}}})
		case 8:
			b, a := pop(), pop()
			push(join(a, b))
		case 9:
			k := int(arg(&i)%4) + 1
			items := make([]fzItem, k)
			for j := k - 1; j >= 0; j-- {
				items[j] = pop()
			}
			push(join(items...))
		case 10:
			b, a := pop(), pop()
			n := &fzNode{}
			for _, it := range []fzItem{a, b} {
				if it.err != nil {
					n.children = append(n.children, it.node)
				}
			}
			err := fmt.Errorf("fuzz: both: %w and %w", a.err, b.err)
			if len(n.children) == 0 {
				push(leaf(err))
				break
			}
			push(fzItem{err: err, node: n})
		case 11:
			in := pop()
			final := arg(&i)%2 == 0
			n := &fzNode{decides: final, decision: errclass.Decision{Action: errclass.Fail}}
			if in.err != nil {
				n.children = []*fzNode{in.node}
			}
			push(fzItem{err: &fzFinalWrap{final: final, err: in.err}, node: n})
		case 12:
			push(fzItem{})
		case 13:
			in := pop()
			n := &fzNode{}
			if in.err != nil {
				n.children = []*fzNode{in.node}
			}
			push(fzItem{err: &fzIs{err: in.err}, node: n})
		case 14:
			push(join(pop()))
		}
	}
	return pop()
}

// fzFirst returns the decision of the first node that decides, in
// errors.Is order, and whether there is one.
func fzFirst(n *fzNode) (errclass.Decision, bool) {
	if n == nil {
		return errclass.Decision{}, false
	}
	if n.decides {
		return n.decision, true
	}
	for _, c := range n.children {
		if d, ok := fzFirst(c); ok {
			return d, true
		}
	}
	return errclass.Decision{}, false
}

// fzAny reports whether any node of the tree satisfies f.
func fzAny(n *fzNode, f func(*fzNode) bool) bool {
	if n == nil {
		return false
	}
	if f(n) {
		return true
	}
	for _, c := range n.children {
		if fzAny(c, f) {
			return true
		}
	}
	return false
}

// fzChain builds a chain of classifiers from spec.
func fzChain(spec []byte, depth int) []errclass.Classifier {
	if len(spec) > 16 {
		spec = spec[:16]
	}
	var links []errclass.Classifier
	for i := 0; i < len(spec); i++ {
		switch spec[i] % 12 {
		case 0:
			links = append(links, nil)
		case 1:
			links = append(links, errclass.Markers())
		case 2:
			links = append(links, errclass.Default())
		case 3:
			links = append(links, errclass.Is(errFzA, errclass.Decision{Action: errclass.Fail}))
		case 4:
			links = append(links, errclass.Is(errFzB, errclass.Decision{Action: errclass.Retry, After: time.Second}))
		case 5:
			links = append(links, errclass.As(func(e *fzFinalWrap) errclass.Decision {
				if e.final {
					return errclass.Decision{Action: errclass.Expired}
				}
				return errclass.Decision{}
			}))
		case 6:
			links = append(links, always(errclass.Decision{Action: errclass.Retry, After: time.Minute}))
		case 7:
			links = append(links, errclass.Func(func(error) errclass.Decision { return errclass.Decision{} }))
		case 8:
			if depth < 3 && i+1 < len(spec) {
				n := min(int(spec[i+1]%3)+1, len(spec)-i-1)
				links = append(links, errclass.Chain(fzChain(spec[i+1:i+1+n], depth+1)...))
				i += n
			}
		case 9:
			links = append(links, errclass.As[*fzFinalWrap](nil))
		case 10:
			links = append(links, errclass.Is(nil, errclass.Decision{Action: errclass.Fail}))
		case 11:
			links = append(links, errclass.Is(errclass.ErrExpired, errclass.Decision{Action: errclass.Expired}))
		}
	}
	return links
}

func FuzzClassify(f *testing.F) {
	// op codes: 0 leaf, 1 io.EOF, 2 Permanent() true, 3 Permanent() false,
	// 4 Permanent, 5 RetryAfter, 6 CursorExpired, 7 %w, 8 Join 2, 9 Join k,
	// 10 two %w, 11 Permanent() bool wrapper, 12 nil, 13 Is-method wrapper,
	// 14 Join 1.
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0, 0, 4}, []byte{1})                        // Permanent(a)
	f.Add([]byte{0, 1, 5, 200, 4}, []byte{2})                // Permanent(RetryAfter(b, -56ms))
	f.Add([]byte{0, 0, 6, 0, 1, 4, 8}, []byte{3, 1})         // Join(Expired(a), Permanent(b))
	f.Add([]byte{12, 4, 12, 5, 9, 12, 6}, []byte{2, 6})      // markers of nil
	f.Add([]byte{0, 2, 11, 1, 0, 0, 6, 10, 7}, []byte{5, 2}) // %w(%w and %w)
	f.Add([]byte{3, 11, 0, 2, 8, 13, 14}, []byte{8, 2, 3, 4, 1})
	f.Add([]byte{0, 0, 0, 1, 0, 2, 9, 3, 6, 5, 10}, []byte{10, 11, 9, 7, 0, 2})
	f.Fuzz(func(t *testing.T, prog, spec []byte) {
		it := fzBuild(t, prog)
		err := it.err

		// Default and Markers follow the documented rule, and are stable.
		want, marked := fzFirst(it.node)
		wantDefault := want
		if !marked {
			wantDefault = errclass.Decision{Action: errclass.Retry}
		}
		for range 2 {
			if got := errclass.Default().Classify(err); got != wantDefault {
				t.Fatalf("Default().Classify(%v) = %v, want %v", err, got, wantDefault)
			}
			if got := errclass.Markers().Classify(err); got != want {
				t.Fatalf("Markers().Classify(%v) = %v, want %v", err, got, want)
			}
		}
		_ = wantDefault.String()

		// ErrExpired matches wherever an expired marker is in the tree.
		hasExpired := fzAny(it.node, func(n *fzNode) bool { return n.expired })
		if got := errors.Is(err, errclass.ErrExpired); got != hasExpired {
			t.Fatalf("errors.Is(%v, ErrExpired) = %v, want %v", err, got, hasExpired)
		}

		// A chain answers its first link's answer that is not Unknown.
		links := fzChain(spec, 0)
		var wantChain errclass.Decision
		for _, l := range links {
			if l == nil {
				continue
			}
			if d := l.Classify(err); d.Action != errclass.Unknown {
				wantChain = d
				break
			}
		}
		chain := errclass.Chain(links...)
		for range 2 {
			if got := chain.Classify(err); got != wantChain {
				t.Fatalf("Chain(%d links).Classify(%v) = %v, want %v", len(links), err, got, wantChain)
			}
		}
	})
}

// Past the number of errors errclass walks (errwalk.Budget, 256), a marker
// is not seen and the error is retried: the walk is bounded so that a broken
// (cyclic) error type cannot hang a stream.
func TestMarkerBeyondTheWalkDepthIsIgnored(t *testing.T) {
	tests := []struct {
		name  string
		wraps int
		want  errclass.Decision
	}{
		{name: "at depth 90", wraps: 90, want: errclass.Decision{Action: errclass.Fail}},
		{name: "at depth 300", wraps: 300, want: errclass.Decision{Action: errclass.Retry}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := errclass.Permanent(errFzA)
			for range tt.wraps {
				err = fmt.Errorf("w: %w", err)
			}
			if got := errclass.Default().Classify(err); got != tt.want {
				t.Errorf("Default().Classify(%d wraps of Permanent) = %v, want %v", tt.wraps, got, tt.want)
			}
		})
	}
}
