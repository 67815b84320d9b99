package egress

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/runsc/sandboxtest"
)

// The end-to-end test runs real gVisor sandboxes (runsc and the rootfs of make sandbox, as root);
// its sandboxes carry a prefix of their own, and TestMain asserts that none is left.
var testEnv sandboxtest.Setup

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, &testEnv, sandboxtest.MainOptions{Who: "the egress proxy's sandbox test", Prefix: "the", What: "sandboxes",
		Leftovers: func(s sandboxtest.Setup) sandboxtest.Leftovers {
			list := func(ctx context.Context) (sandbox.SweepOptions, error) {
				rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: s.Runsc, Root: filepath.Join(s.Dir, "runsc")})
				return sandbox.SweepOptions{Runtime: rt, Prefix: s.Prefix, StateDir: s.Dir}, err
			}
			return sandboxtest.Leftovers{
				List: func(ctx context.Context) ([]string, error) {
					opts, err := list(ctx)
					if err != nil {
						return nil, err
					}
					return sandbox.Leftovers(ctx, opts)
				},
				Sweep: func(ctx context.Context) error {
					opts, err := list(ctx)
					if err != nil {
						return err
					}
					return sandbox.Sweep(ctx, opts)
				},
			}
		}}))
}

// tinyWheel builds tinypkg-0.1-py3-none-any.whl: one pure-Python module.
func tinyWheel(t *testing.T) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"tinypkg/__init__.py", "def hello():\n    return \"hello from tinypkg\"\n"},
		{"tinypkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\nSummary: a test package\n"},
		{"tinypkg-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: toolhost-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("tinypkg-0.1.dist-info/RECORD,,\n")
	w, err := zw.Create("tinypkg-0.1.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// packageIndex serves a PEP 503 simple index holding the wheel.
func packageIndex(wheel []byte) http.Handler {
	const file = "tinypkg-0.1-py3-none-any.whl"
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/":
			fmt.Fprint(w, `<!DOCTYPE html><html><body><a href="/simple/tinypkg/">tinypkg</a></body></html>`)
		case "/simple/tinypkg/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, file, hex.EncodeToString(sum[:]), file)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(wheel)
	})
	return mux
}

// testCA makes a CA and a certificate it signs for names; it returns the CA's PEM and the
// server's certificate.
func testCA(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolhost test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestPipInstallsThroughTheProxyOnly: from inside a packages-mode gVisor sandbox, pip installs a
// wheel from a package server of the test's own (in a lab namespace, named pkgs.test by the
// proxy's test resolver) through the proxy, over https (CONNECT) and over a plain-http index, and
// the package imports; a host name not listed, a listed name that resolves to a private address
// and a direct connection are refused, with the proxy's reason in pip's output and in the proxy's
// log, with the session.
func TestPipInstallsThroughTheProxyOnly(t *testing.T) {
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	ctx := context.Background()
	l := newLab(t)
	caPEM, cert := testCA(t, "pkgs.test", "files.example.org", "private.test")
	index := packageIndex(tinyWheel(t))
	plain := &http.Server{Handler: index}
	go func() { _ = plain.Serve(l.listen(t, l.nsIP.String()+":80")) }()
	t.Cleanup(func() { _ = plain.Close() })
	secure := &http.Server{Handler: index, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = secure.ServeTLS(l.listen(t, l.nsIP.String()+":443"), "", "") }()
	t.Cleanup(func() { _ = secure.Close() })

	keys, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	logBuf := &syncBuffer{}
	proxy, err := New(ctx, Options{
		Listen:       netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 87, b[0], 1 + b[1]%250}), 0),
		AllowedHosts: []string{"pkgs.test", "private.test"},
		Resolver: fakeResolver{"pkgs.test": {l.nsIP}, "files.example.org": {l.nsIP},
			"private.test": {netip.MustParseAddr("192.168.77.7")}},
		AllowAddrs: []netip.Prefix{netip.PrefixFrom(l.nsIP, 32)},
		Auth:       keys.Auth,
		Log:        hclog.New(&hclog.LoggerOptions{Output: logBuf, Level: hclog.Debug}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close(context.Background()) })

	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(testEnv.Dir, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.NewManager(sandbox.ManagerOptions{Runtime: rt, Rootfs: testEnv.Rootfs, StateDir: testEnv.Dir,
		Prefix: testEnv.Prefix, Network: sandbox.NetworkOptions{OnlyTo: proxy.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("closing the sandbox manager: %v", err)
		}
	})
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "ca.pem"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sb, err := m.Start(startCtx, sandbox.Options{Args: []string{"/bin/sleep", "600"}, Lifetime: sandbox.LongLived,
		Network: true, Workspace: work, Limits: sandbox.Limits{MemoryBytes: 512 << 20, Pids: 512, CPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Destroy(context.Background()) }()

	session := "s" + strings.Repeat("5e", 12)
	proxyURL := keys.ProxyURL(proxy.Addr(), session)
	withProxy := append(sandbox.DefaultEnv(), "HTTP_PROXY="+proxyURL, "HTTPS_PROXY="+proxyURL, "http_proxy="+proxyURL,
		"https_proxy="+proxyURL, "PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_RETRIES=1", "PIP_TIMEOUT=20")
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		t0 := time.Now()
		code, err := sb.Exec(ctx, args, &sandbox.ExecOpts{Env: env, Stdout: out, Stderr: out})
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		b, _ := os.ReadFile(out.Name())
		label, _, _ := strings.Cut(strings.TrimSpace(strings.Join(args[:min(len(args), 4)], " ")), "\n")
		t.Logf("%s … took %v", label, time.Since(t0).Round(time.Millisecond))
		return code, string(b)
	}
	pip := func(index string, extra ...string) (int, string) {
		return run(withProxy, append([]string{"/usr/bin/python3", "-m", "pip", "install", "--no-cache-dir", "--cert", "/work/ca.pem", "--index-url", index}, append(extra, "tinypkg")...)...)
	}

	// Refused first, so nothing is installed yet.
	code, out := pip("https://files.example.org/simple")
	t.Logf("pip from an unlisted host: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "toolhost: files.example.org is not in [sessions] package_hosts") {
		t.Errorf("pip from a host not listed: exit %d; want a failure saying why", code)
	}
	code, out = pip("https://private.test/simple")
	t.Logf("pip from a private address: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "toolhost: private.test resolves to 192.168.77.7, a private address") {
		t.Errorf("pip from a listed name on a private address: exit %d; want a failure saying why", code)
	}
	direct := fmt.Sprintf(`
import socket
for addr in [(%q, 443), (%q, 80), (%q, %d)]:
    try:
        socket.create_connection(addr, timeout=5).close()
        print("connected", addr)
    except OSError as e:
        print("refused", addr, e)
try:
    socket.getaddrinfo("pkgs.test", 443)
    print("resolved pkgs.test")
except OSError as e:
    print("no name resolves:", e)
`, l.nsIP, l.nsIP, l.hostIP, proxy.Addr().Port())
	code, out = run(sandbox.DefaultEnv(), "/usr/bin/python3", "-c", direct)
	t.Logf("direct connections: exit %d\n%s", code, out)
	if code != 0 || strings.Contains(out, "connected") || strings.Contains(out, "resolved") || strings.Count(out, "refused") != 3 {
		t.Errorf("a direct connection from a packages-mode sandbox: exit %d\n%s", code, out)
	}
	pipWith := func(env []string) (int, string) {
		env = append(env, "PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_RETRIES=1", "PIP_TIMEOUT=10")
		return run(env, "/usr/bin/python3", "-m", "pip", "install", "--no-cache-dir", "--cert", "/work/ca.pem", "--index-url", "https://pkgs.test/simple", "tinypkg")
	}
	code, out = pipWith(sandbox.DefaultEnv())
	t.Logf("pip without the proxy: exit %d\n%s", code, out)
	if code == 0 {
		t.Errorf("pip without the proxy installed")
	}
	code, out = pipWith(append(sandbox.DefaultEnv(), "HTTPS_PROXY=http://"+proxy.Addr().String()))
	t.Logf("pip without the session's credentials: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "407 toolhost: the package proxy needs this session's credentials") {
		t.Errorf("pip through the proxy without credentials: exit %d; want a 407 saying why", code)
	}

	// Allowed: https through CONNECT, then a plain-http index.
	code, out = pip("https://pkgs.test/simple")
	t.Logf("pip install over https: exit %d\n%s", code, out)
	if code != 0 || !strings.Contains(out, "Successfully installed tinypkg-0.1") {
		t.Fatalf("pip install through the proxy failed: exit %d", code)
	}
	code, out = run(withProxy, "/usr/bin/python3", "-c", "import tinypkg; print(tinypkg.hello())")
	if code != 0 || strings.TrimSpace(out) != "hello from tinypkg" {
		t.Errorf("importing the installed package: exit %d %q", code, out)
	}
	code, out = pip("http://pkgs.test/simple", "--trusted-host", "pkgs.test", "--force-reinstall")
	t.Logf("pip install over a plain-http index: exit %d\n%s", code, out)
	if code != 0 || !strings.Contains(out, "Successfully installed tinypkg-0.1") {
		t.Errorf("pip install from a plain-http index through the proxy failed: exit %d", code)
	}

	log := logBuf.String()
	for _, want := range []string{
		"session=" + session + " host=files.example.org why=host",
		"session=" + session + " host=private.test why=address",
		`session="" host=pkgs.test why=credentials`,
		"egress proxy connected: session=" + session + " host=pkgs.test",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the proxy's log has no %q:\n%s", want, log)
		}
	}
}
