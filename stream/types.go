package stream

import (
	"fmt"
	"reflect"
	"strings"
)

// isNil reports whether v is nil or an interface holding a nil pointer, map,
// func, chan or slice.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// typeName names the type parameter X for error messages.
func typeName[X any]() string {
	return reflect.TypeFor[X]().String()
}

// typeArg names the type argument of a generic value's type, for error
// messages: Hooks[int64] gives "int64".
func typeArg(v any) string {
	s := fmt.Sprintf("%T", v)
	if i := strings.IndexByte(s, '['); i >= 0 && strings.HasSuffix(s, "]") {
		return s[i+1 : len(s)-1]
	}
	return s
}
