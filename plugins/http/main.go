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
// A redirect to another host (scheme, host or port not the URL's) carries
// none of the tool's headers, unless the tool lists that host in
// run.redirect_hosts; one that would carry the request's body there (a 307
// or 308) is refused; a redirect from https to plain http never carries
// them, listed or not. No message or log line shows a URL's userinfo or
// query, or a header's value.
//
// A successful response (status 200–299, after redirects) is the result
//
//	{"status": 200, "headers": {"content-type": "…", …}, "body": …}
//
// where headers keeps a few response headers (content-type,
// content-length, content-language, last-modified, etag, location,
// retry-after), and body is the response parsed as JSON when it is JSON
// (by its Content-Type, or with none), else its text, or null when empty;
// a body that is not UTF-8 text comes as "body_base64" instead. An image
// or audio body (Content-Type image/* or audio/*) is not in the value
// (body is null): it is the result's content, one image or audio part
// with the response's MIME type. With run.pick the result is only the
// picked value.
//
// A run that fails ends with one of these error codes:
//
//	http_status         the server answered outside 200–299; the message
//	                    gives the status and the start of the body
//	private_address     the address dialled (or redirected to) is private
//	too_many_redirects  more than five redirects
//	bad_redirect        a redirect to a scheme other than http or https, or
//	                    one that would send the body to another host
//	too_large           the response is over [http] max_bytes
//	timeout             the request took longer than its timeout_seconds
//	http_error          the request failed: DNS, refused, reset, TLS, …
//	pick_missing        the response has no field at run.pick
//	not_json            run.pick is set but the response is not JSON
//	bad_argument        an argument can't go where its placeholder is
//	bad_tool            the run table does not pass Check on this host
//	cancelled           the caller cancelled the run
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(&kind{})
}
