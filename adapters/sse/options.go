package sse

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/resumable-go/resumable/internal/badarg"
)

// Option configures a [Source] made by [NewSource]; each sets the Source
// field of the same name. A nil Option is ignored.
type Option interface {
	apply(*Source, *[]error)
}

type optionFunc func(*Source, *[]error)

func (f optionFunc) apply(s *Source, errs *[]error) { f(s, errs) }

// WithClient sets [Source.Client], which sends the requests; nil means
// http.DefaultClient. A Client with a Timeout makes NewSource fail: it
// would cut every stream.
func WithClient(c *http.Client) Option {
	return optionFunc(func(s *Source, errs *[]error) {
		if c != nil && c.Timeout != 0 {
			*errs = append(*errs, badarg.New("sse: WithClient", "c.Timeout", c.Timeout, "must be zero; it would cut every stream"))
		}
		s.Client = c
	})
}

// WithHeader sets [Source.Header], extra request headers such as
// Authorization (a copy of h). A value no HTTP request can carry (a
// control character) makes NewSource fail.
func WithHeader(h http.Header) Option {
	return optionFunc(func(s *Source, errs *[]error) {
		*errs = append(*errs, checkHeader("sse: WithHeader", "h", h))
		s.Header = h.Clone()
	})
}

// WithMaxEventSize sets [Source.MaxEventSize], the bytes of one line, and
// of the field lines of one event, past which a connection fails. Default
// 1 MiB; n < 1 makes NewSource fail.
func WithMaxEventSize(n int) Option {
	return optionFunc(func(s *Source, errs *[]error) {
		if n < 1 {
			*errs = append(*errs, badarg.New("sse: WithMaxEventSize", "n", n, "must be at least 1"))
		}
		s.MaxEventSize = n
	})
}

// NewSource returns a [Source] of the event stream at rawURL, an absolute
// URL. It checks every argument and option at once: the error matches
// [stream.ErrInvalidOption] and names each one that is wrong. A Source
// filled in as a literal works as well, its settings checked at Open.
func NewSource(rawURL string, opts ...Option) (*Source, error) {
	s := &Source{URL: rawURL}
	errs := []error{checkURL("sse: NewSource", "rawURL", rawURL)}
	for _, o := range opts {
		if o != nil {
			o.apply(s, &errs)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// check returns the error of a Source's settings, each named as its field.
func (s *Source) check() error {
	var errs []error
	errs = append(errs, checkURL("sse: Source", "URL", s.URL))
	if s.MaxEventSize < 0 {
		errs = append(errs, badarg.New("sse: Source", "MaxEventSize", s.MaxEventSize, "must not be negative"))
	}
	if c := s.Client; c != nil && c.Timeout != 0 {
		errs = append(errs, badarg.New("sse: Source", "Client.Timeout", c.Timeout, "must be zero; it would cut every stream"))
	}
	errs = append(errs, checkHeader("sse: Source", "Header", s.Header))
	return errors.Join(errs...)
}

// checkURL refuses what no request can be sent to: a URL that does not
// parse, or has no scheme or host.
func checkURL(where, arg, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return badarg.New(where, arg, raw, "does not parse")
	case u.Scheme == "" || u.Host == "":
		return badarg.New(where, arg, raw, "must be an absolute URL")
	}
	return nil
}

// checkHeader refuses header values net/http would refuse to send.
func checkHeader(where, arg string, h http.Header) error {
	for k, vs := range h {
		for _, v := range vs {
			if checkID(v) != nil {
				return badarg.New(where, arg+"["+k+"]", v, "has a control character")
			}
		}
	}
	return nil
}
