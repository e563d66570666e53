// SPDX-License-Identifier: Apache-2.0

// text.go owns the check that a request body holds only text JSON can carry: every string, member name
// and text a value marshals itself to must be UTF-8. encoding/json writes each byte that is not UTF-8 as
// U+FFFD, so without the check a value, a field name, a row or an owner would reach the gateway changed,
// and be stored so, without a word. It must not encode anything: transport.go marshals what passed.

package fencegate

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// maxTextDepth bounds the walk: a value nested deeper (a cycle) is left to json.Marshal, which refuses it.
const maxTextDepth = 1000

var (
	jsonMarshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

// checkText returns an *InvalidJSONError (Status 0: nothing was sent) naming the first member of body
// whose text is not UTF-8, as the gateway refuses such a body with 400; nil when all of it is text.
func checkText(body any) error {
	where := notText(reflect.ValueOf(body), "body", 0)
	if where == "" {
		return nil
	}
	return &InvalidJSONError{&Problem{Code: "invalid_json",
		Detail: where + " is not UTF-8 text: JSON would carry U+FFFD in place of its bytes"}}
}

// notText is where, under v (found at path, depth levels down), the first text that is not UTF-8 lies, or
// "" when there is none. It walks what encoding/json writes: strings, member names, the elements of
// slices, arrays and maps, the exported fields of structs (and of the structs they embed) that the json
// tag does not leave out, and what pointers and interfaces hold; a []byte goes out as base64. A value that marshals itself as JSON is left
// alone (its bytes go out as they are, and the gateway refuses what is not UTF-8); one that marshals
// itself as text is judged by that text.
func notText(v reflect.Value, path string, depth int) string {
	if !v.IsValid() || depth > maxTextDepth {
		return ""
	}
	t := v.Type()
	if t.Implements(jsonMarshalerType) || v.CanAddr() && reflect.PointerTo(t).Implements(jsonMarshalerType) {
		return ""
	}
	if t.Implements(textMarshalerType) {
		if !v.CanInterface() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return ""
		}
		text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err == nil && !utf8.Valid(text) {
			return path
		}
		return ""
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return path
		}
	case reflect.Pointer, reflect.Interface:
		return notText(v.Elem(), path, depth+1)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i := 0; i < v.Len(); i++ {
			if where := notText(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); where != "" {
				return where
			}
		}
	case reflect.Map:
		for members := v.MapRange(); members.Next(); {
			if notText(members.Key(), path, depth+1) != "" {
				return "a member name of " + path
			}
			member := fmt.Sprintf("%s.%v", path, members.Key())
			if where := notText(members.Value(), member, depth+1); where != "" {
				return where
			}
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			field := t.Field(i)
			name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
			promoted := field.Anonymous && field.Type.Kind() == reflect.Struct // its exported fields are the struct's
			if !field.IsExported() && !promoted || name == "-" {
				continue
			}
			if name == "" {
				name = field.Name
			}
			if where := notText(v.Field(i), path+"."+name, depth+1); where != "" {
				return where
			}
		}
	}
	return ""
}
