// Command toolhost-plugin-http is the http tool kind of toolhost: a tool of
// this kind sends one web request built from its parameters (method, URL,
// headers and body, each a template with {{param}} placeholders) and returns
// the response, or one field picked out of a JSON response.
//
// Only public addresses are called unless the host config sets
// [http] allow_private = true. The check is made on the address actually
// dialled, so a host name that resolves (or re-resolves) to a private
// address is refused too, and it is made again for every redirect; at most
// five redirects are followed. The time a request may take and the size of
// the response are capped by [http] timeout_seconds and max_bytes.
//
// A response with a status outside 200–299 ends the run with the error code
// http_status, whose message gives the status and the start of the body; a
// successful response is the result {"status", "headers", "body"}, or only
// the picked value when the tool has run.pick.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(&kind{})
}
