// Package errwalk walks error trees with a bound, for errors that come from
// user code: a cyclic or enormous tree ends the walk instead of hanging the
// caller, as errors.Is and errors.As (which have no bound) would.
package errwalk

// Budget is how many errors one walk visits at the most.
const Budget = 256

// First returns the first error in err's tree (depth first, as errors.Is
// walks it) for which match reports true, or nil when there is none within
// [Budget] errors.
func First(err error, match func(error) bool) error {
	budget := Budget
	return first(err, match, &budget)
}

func first(err error, match func(error) bool, budget *int) error {
	for err != nil {
		if *budget <= 0 {
			return nil
		}
		*budget--
		if match(err) {
			return err
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if f := first(e, match, budget); f != nil {
					return f
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// Is is errors.Is within [Budget] errors. target must be comparable (a
// sentinel made by errors.New is).
func Is(err, target error) bool {
	if err == nil || target == nil {
		return err == target
	}
	budget := Budget
	return is(err, target, &budget)
}

func is(err, target error, budget *int) bool {
	for err != nil {
		if *budget <= 0 {
			return false
		}
		*budget--
		if err == target {
			return true
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(target) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if is(e, target, budget) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
