package cursor

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
)

var (
	boolType          = reflect.TypeFor[bool]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// maxJSONDepth bounds the recursion of sameJSON: deeper than any JSON
// value encoding/json decodes.
const maxJSONDepth = 10_001

// jsonTypeError returns an error when JSON can store nothing of a value of
// type t: a struct (or pointer to one) that has fields but no exported or
// embedded one, and does not marshal itself. Other types are left to
// Encode's check of each value.
func jsonTypeError(t reflect.Type) error {
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base.Kind() != reflect.Struct || base.NumField() == 0 ||
		marshalsItself(base) || marshalsItself(reflect.PointerTo(base)) {
		return nil
	}
	for i := range base.NumField() {
		if f := base.Field(i); f.IsExported() || f.Anonymous {
			return nil
		}
	}
	return fmt.Errorf("cursor: JSON codec: %v has no exported fields, and encodes as {} whatever its value", base)
}

// marshalsItself reports whether encoding/json lets values of t encode
// themselves.
func marshalsItself(t reflect.Type) bool {
	return t.Implements(marshalerType) || t.Implements(textMarshalerType)
}

// jsonValue returns the value encoding/json sees when it marshals *c: not
// addressable, so that it calls the same marshal methods.
func jsonValue[C any](c *C) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	if v.Kind() == reflect.Interface {
		return v // its dynamic value is not addressable
	}
	return reflect.ValueOf(*c)
}

// sameJSON reports whether got, decoded from the JSON encoding of want,
// holds the same cursor, as [JSON] documents; when not, it also returns
// where they differ below the cursor, as a Go selector (".Field", "[2]",
// `["key"]`). depth counts the levels above.
func sameJSON(want, got reflect.Value, depth int) (where string, same bool) {
	if want.Type() != got.Type() || depth > maxJSONDepth {
		return "", false
	}
	switch want.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func:
		if want.IsNil() || got.IsNil() {
			switch want.Kind() {
			case reflect.Map, reflect.Slice:
				return "", want.Len() == got.Len() // nil equals empty
			}
			return "", want.IsNil() == got.IsNil()
		}
	}
	if want.CanInterface() && got.CanInterface() {
		if eq := equalMethod(want); eq.IsValid() {
			return "", eq.Call([]reflect.Value{got})[0].Bool()
		}
		if marshalsItself(want.Type()) || want.CanAddr() && got.CanAddr() && marshalsItself(reflect.PointerTo(want.Type())) {
			if want.CanAddr() {
				want, got = want.Addr(), got.Addr()
			}
			a, errA := json.Marshal(want.Interface())
			b, errB := json.Marshal(got.Interface())
			return "", errA == nil && errB == nil && bytes.Equal(a, b)
		}
	}
	switch want.Kind() {
	case reflect.Pointer:
		return sameJSON(want.Elem(), got.Elem(), depth+1)
	case reflect.Interface:
		if w, g := want.Elem(), got.Elem(); w.Type() != g.Type() {
			return ".(" + w.Type().String() + ")", false
		}
		return sameJSON(want.Elem(), got.Elem(), depth+1)
	case reflect.Struct:
		for i := range want.NumField() {
			if where, same := sameJSON(want.Field(i), got.Field(i), depth+1); !same {
				return "." + want.Type().Field(i).Name + where, false
			}
		}
		return "", true
	case reflect.Slice, reflect.Array:
		if want.Len() != got.Len() {
			return "", false
		}
		if want.Kind() == reflect.Slice && want.Type().Elem().Kind() == reflect.Uint8 {
			return "", bytes.Equal(want.Bytes(), got.Bytes())
		}
		for i := range want.Len() {
			if where, same := sameJSON(want.Index(i), got.Index(i), depth+1); !same {
				return fmt.Sprintf("[%d]%s", i, where), false
			}
		}
		return "", true
	case reflect.Map:
		if want.Len() != got.Len() {
			return "", false
		}
		for it := want.MapRange(); it.Next(); {
			g := got.MapIndex(it.Key())
			if !g.IsValid() {
				return fmt.Sprintf("[%#v]", it.Key()), false
			}
			if where, same := sameJSON(it.Value(), g, depth+1); !same {
				return fmt.Sprintf("[%#v]%s", it.Key(), where), false
			}
		}
		return "", true
	case reflect.Float32, reflect.Float64:
		x, y := want.Float(), got.Float()
		return "", x == y || x != x && y != y
	case reflect.Func:
		return "", false // two non-nil funcs are never equal, as in reflect.DeepEqual
	}
	return "", want.Equal(got) // booleans, numbers, strings, channels
}

// equalMethod returns v's method Equal(T) bool, where T is v's type, or
// the zero Value. v must be usable with Interface.
func equalMethod(v reflect.Value) reflect.Value {
	m := v.MethodByName("Equal")
	if !m.IsValid() {
		if _, ok := reflect.PointerTo(v.Type()).MethodByName("Equal"); ok {
			p := reflect.New(v.Type()) // v may not be addressable: call it on a copy
			p.Elem().Set(v)
			m = p.MethodByName("Equal")
		}
	}
	if !m.IsValid() {
		return reflect.Value{}
	}
	if mt := m.Type(); mt.NumIn() != 1 || mt.In(0) != v.Type() || mt.NumOut() != 1 || mt.Out(0) != boolType {
		return reflect.Value{}
	}
	return m
}
