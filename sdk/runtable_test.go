package sdk_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/toolhost/toolhost/sdk"
)

// decode decodes a run table that must be one.
func decode(t *testing.T, run string) *sdk.RunTable {
	t.Helper()
	rt, err := sdk.DecodeRunTable(json.RawMessage(run))
	if err != nil {
		t.Fatalf("DecodeRunTable(%s): %v", run, err)
	}
	return rt
}

// fieldErrors returns rt's problems, failing unless Err gives FieldErrors
// or nil.
func fieldErrors(t *testing.T, rt *sdk.RunTable) sdk.FieldErrors {
	t.Helper()
	err := rt.Err()
	if err == nil {
		return nil
	}
	var fe sdk.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("Err returned %v (%T), not FieldErrors", err, err)
	}
	return fe
}

// list reads the list at key, which must be one.
func list(t *testing.T, rt *sdk.RunTable, key string) *sdk.RunList {
	t.Helper()
	l, ok := rt.List(key, "not a list")
	if !ok {
		t.Fatalf("%s is not a list", key)
	}
	return l
}

func TestDecodeRunTableRefusesWhatIsNotATable(t *testing.T) {
	for _, run := range []string{``, `nul`, `null`, `"x"`, `[1]`, `3`} {
		rt, err := sdk.DecodeRunTable(json.RawMessage(run))
		want := sdk.FieldErrors{{Path: "run", Message: "must be a table"}}
		if rt != nil || !reflect.DeepEqual(err, want) {
			t.Errorf("DecodeRunTable(%q) = %v, %v; want nil, %v", run, rt, err, want)
		}
	}
}

func TestRunTableGettersReadTheirKinds(t *testing.T) {
	rt := decode(t, `{"s": "hi", "n": 7, "f": 5.0, "x": 1.5, "list": ["a", "b"],
		"tab": {"k": "v"}, "tabs": [{"id": "a"}, {"id": "b"}], "raw": {"any": [1]}}`)
	if s, ok := rt.String("s", "bad"); !ok || s != "hi" {
		t.Errorf("String: %q %v", s, ok)
	}
	if n, ok := rt.Int("n", 1, 10, "bad"); !ok || n != 7 {
		t.Errorf("Int: %d %v", n, ok)
	}
	if n, ok := rt.Int("f", 1, 10, "bad"); !ok || n != 5 {
		t.Errorf("Int of 5.0: %d %v", n, ok)
	}
	if f, ok := rt.Float("x", "bad"); !ok || f != 1.5 {
		t.Errorf("Float: %v %v", f, ok)
	}
	if l, ok := rt.Strings("list", "bad"); !ok || !reflect.DeepEqual(l, []string{"a", "b"}) {
		t.Errorf("Strings: %v %v", l, ok)
	}
	if tab, ok := rt.Table("tab", "bad"); !ok {
		t.Errorf("Table: %v %v", tab, ok)
	} else if v, ok := tab.String("k", "bad"); !ok || v != "v" {
		t.Errorf("Table's String: %q %v", v, ok)
	}
	tabs, ok := rt.List("tabs", "bad")
	if !ok || tabs.Len() != 2 {
		t.Fatalf("List: %v %v", tabs, ok)
	}
	if tab, ok := tabs.Table(1, "bad item"); !ok {
		t.Errorf("List's Table(1): %v %v", tab, ok)
	} else if id, _ := tab.String("id", "bad"); id != "b" {
		t.Errorf("List's Table(1) id %q", id)
	}
	if s, ok := list(t, rt, "list").String(1, "bad"); !ok || s != "b" {
		t.Errorf("List's String(1): %q %v", s, ok)
	}
	if raw, ok := rt.Raw("raw"); !ok || string(raw) != `{"any": [1]}` {
		t.Errorf("Raw: %s %v", raw, ok)
	}
	rt.Done(func(k string) string { return "unknown " + k })
	if fe := fieldErrors(t, rt); fe != nil {
		t.Errorf("problems with good values: %v", fe)
	}
}

func TestRunTableRecordsEveryWrongValueAtItsPath(t *testing.T) {
	rt := decode(t, `{"s": 1, "null": null, "n": "5", "half": 2.5, "big": 11, "f": "x",
		"list": ["a", 2], "tab": [], "tabs": [{"k": 1}, 3], "notabs": {}}`)
	rt.String("s", "s is wrong")
	rt.String("null", "null is wrong")
	rt.Int("n", 1, 10, "n is wrong")
	rt.Int("half", 1, 10, "half is wrong")
	rt.Int("big", 1, 10, "big is wrong")
	rt.Float("f", "f is wrong")
	rt.Strings("list", "list is wrong")
	rt.Table("tab", "tab is wrong")
	tabs := list(t, rt, "tabs")
	for i := range tabs.Len() {
		if tab, ok := tabs.Table(i, "item is wrong"); ok {
			tab.String("k", "k is wrong")
		} else if i != 1 {
			t.Errorf("item %d is not a table", i)
		}
	}
	if _, ok := list(t, rt, "list").String(1, "item 1 is wrong"); ok {
		t.Error("the number 2 was read as a string")
	}
	rt.List("notabs", "notabs is wrong")
	if _, ok := rt.String("absent", "absent is wrong"); ok {
		t.Error("an absent key was read")
	}
	want := sdk.FieldErrors{
		{Path: "run.s", Message: "s is wrong"},
		{Path: "run.null", Message: "null is wrong"},
		{Path: "run.n", Message: "n is wrong"},
		{Path: "run.half", Message: "half is wrong"},
		{Path: "run.big", Message: "big is wrong"},
		{Path: "run.f", Message: "f is wrong"},
		{Path: "run.list", Message: "list is wrong"},
		{Path: "run.tab", Message: "tab is wrong"},
		{Path: "run.tabs[0].k", Message: "k is wrong"},
		{Path: "run.tabs[1]", Message: "item is wrong"},
		{Path: "run.list[1]", Message: "item 1 is wrong"},
		{Path: "run.notabs", Message: "notabs is wrong"},
	}
	if got := fieldErrors(t, rt); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %v\nwant %v", got, want)
	}
}

func TestRunTableDoneReportsTheKeysNobodyRead(t *testing.T) {
	rt := decode(t, `{"url": "x", "zeta": 1, "alpha": 2, "nested": {"used": 1, "extra": 2}}`)
	if !rt.Has("url") || rt.Has("nope") {
		t.Error("Has is wrong")
	}
	rt.String("url", "")
	nested, _ := rt.Table("nested", "")
	nested.Int("used", 0, 9, "")
	nested.Done(func(k string) string { return fmt.Sprintf("%q is not a key here", k) })
	rt.ErrorAt("params[0].name", "is not used")
	rt.Done(func(k string) string { return "unknown " + k })
	want := sdk.FieldErrors{
		{Path: "run.nested.extra", Message: `"extra" is not a key here`},
		{Path: "params[0].name", Message: "is not used"},
		{Path: "run.alpha", Message: "unknown alpha"},
		{Path: "run.zeta", Message: "unknown zeta"},
	}
	if got := fieldErrors(t, rt); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %v\nwant %v", got, want)
	}
}

func TestRunTableErrorfAndWordsForMessages(t *testing.T) {
	rt := decode(t, `{"a": "t", "b": 1, "c": true, "d": {}, "e": [], "f": null, "g":   12.50  }`)
	for key, want := range map[string]string{"a": "text", "b": "a number", "c": "true/false", "d": "a table",
		"e": "a list", "f": "null", "g": "a number", "h": "nothing"} {
		if got := rt.Describe(key); got != want {
			t.Errorf("Describe(%s) = %q, want %q", key, got, want)
		}
	}
	if got := rt.Written("g"); got != "12.50" {
		t.Errorf("Written(g) = %q", got)
	}
	if got := rt.Written("h"); got != "" {
		t.Errorf("Written(h) = %q", got)
	}
	rt.Errorf("", "whole table: %d", 1)
	rt.Errorf("a", "key a: %s", "x")
	want := sdk.FieldErrors{{Path: "run", Message: "whole table: 1"}, {Path: "run.a", Message: "key a: x"}}
	if got := fieldErrors(t, rt); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %v\nwant %v", got, want)
	}
}

// A kind reads its run table with typed getters, in its own words, and
// reports the keys it doesn't know.
func ExampleDecodeRunTable() {
	run := json.RawMessage(`{"type": "http", "url": 5, "timeout_seconds": 900, "retries": 3}`)
	t, err := sdk.DecodeRunTable(run)
	if err != nil {
		fmt.Println(err)
		return
	}
	t.String("type", "must be a string")
	if _, ok := t.String("url", "must be a string"); !ok && !t.Has("url") {
		t.Errorf("url", "is missing")
	}
	t.Int("timeout_seconds", 1, 600, "must be a whole number of seconds from 1 to 600, not "+t.Written("timeout_seconds"))
	t.Done(func(key string) string { return "is not a key of an http run" })
	if err := t.Err(); err != nil {
		for _, fe := range err.(sdk.FieldErrors) {
			fmt.Printf("%s: %s\n", fe.Path, fe.Message)
		}
	}
	// Output:
	// run.url: must be a string
	// run.timeout_seconds: must be a whole number of seconds from 1 to 600, not 900
	// run.retries: is not a key of an http run
}

func TestRunTableBoolReadsTrueOrFalseOnly(t *testing.T) {
	rt := decode(t, `{"yes": true, "no": false, "null": null, "text": "true", "one": 1}`)
	if b, ok := rt.Bool("yes", "bad"); !ok || !b {
		t.Errorf("Bool(true) = %v %v", b, ok)
	}
	if b, ok := rt.Bool("no", "bad"); !ok || b {
		t.Errorf("Bool(false) = %v %v", b, ok)
	}
	if _, ok := rt.Bool("absent", "bad"); ok {
		t.Error("Bool of an absent key is ok")
	}
	for _, key := range []string{"null", "text", "one"} {
		if _, ok := rt.Bool(key, key+" is wrong"); ok {
			t.Errorf("Bool(%s) is ok", key)
		}
	}
	want := sdk.FieldErrors{{Path: "run.null", Message: "null is wrong"}, {Path: "run.text", Message: "text is wrong"}, {Path: "run.one", Message: "one is wrong"}}
	if fe := fieldErrors(t, rt); !reflect.DeepEqual(fe, want) {
		t.Errorf("problems = %v; want %v", fe, want)
	}
}

func TestRunTableIntReadsANumberInTextOnlyWhenAsked(t *testing.T) {
	good := map[string]int{`"5"`: 5, `"-3"`: -3, `"5.0"`: 5, `"1e1"`: 10, `7`: 7}
	for v, want := range good {
		rt := decode(t, `{"n": `+v+`}`)
		if n, ok := rt.Int("n", -10, 10, "bad", sdk.NumberInText); !ok || n != want {
			t.Errorf("Int(%s, NumberInText) = %d %v; want %d", v, n, ok, want)
		}
		if v[0] == '"' {
			rt := decode(t, `{"n": `+v+`}`)
			if _, ok := rt.Int("n", -10, 10, "bad"); ok {
				t.Errorf("Int(%s) without NumberInText is ok", v)
			}
		}
	}
	for _, v := range []string{`" 5"`, `"5 "`, `""`, `"five"`, `"5 6"`, `"true"`, `"\"5\""`, `"[5]"`, `"5.5"`, `"11"`, `null`, `true`} {
		rt := decode(t, `{"n": `+v+`}`)
		if n, ok := rt.Int("n", -10, 10, "n is wrong", sdk.NumberInText); ok {
			t.Errorf("Int(%s, NumberInText) = %d, ok", v, n)
		}
		want := sdk.FieldErrors{{Path: "run.n", Message: "n is wrong"}}
		if fe := fieldErrors(t, rt); !reflect.DeepEqual(fe, want) {
			t.Errorf("Int(%s, NumberInText): problems = %v; want %v", v, fe, want)
		}
	}
}
