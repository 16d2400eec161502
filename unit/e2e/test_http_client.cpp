// HttpClient against real loopback servers: retries and backoff, fail-fast 4xx, timeouts,
// connection errors, SSE parsing, validation, cancellation, concurrency and keep-alive.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "e2e_test_util.hpp"
#include "http/http_client.hpp"

namespace dsv4::eval {
namespace {

// A small httplib server on 127.0.0.1 whose routes each test writes.
class LocalServer {
 public:
  template <class Setup>
  explicit LocalServer(Setup setup) {
    svr_.set_keep_alive_max_count(1000);
    setup(svr_);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~LocalServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server svr_;
  int port_ = -1;
  std::thread thread_;
};

HttpRequest quick(const std::string& url) {
  HttpRequest r;
  r.url = url;
  r.body = "{}";
  r.timeout_s = 5;
  r.backoff_s = 0.01;
  r.backoff_max_s = 0.05;
  return r;
}

TEST(HttpClient, PostsJsonBodyWithoutExpectContinue) {
  std::string seen_type, seen_expect, seen_body;
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/echo", [&](const httplib::Request& q, httplib::Response& res) {
      seen_type = q.get_header_value("Content-Type");
      seen_expect = q.get_header_value("Expect");
      seen_body = q.body;
      res.set_content("{\"ok\":true}", "application/json");
    });
  });
  HttpRequest r = quick(s.url("/echo"));
  r.body = std::string(4096, 'x');  // above curl's 1 KiB Expect: 100-continue threshold
  const double t0 = monotonic_seconds();
  HttpResult res = http_fetch(r);
  EXPECT_LT(monotonic_seconds() - t0, 0.5) << "a 100-continue wait would take 1 s";
  ASSERT_TRUE(res.ok()) << res.error_message;
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "{\"ok\":true}");
  EXPECT_EQ(res.attempts, 1);
  EXPECT_EQ(seen_type, "application/json");
  EXPECT_EQ(seen_expect, "");
  EXPECT_EQ(seen_body.size(), 4096u);
  EXPECT_GE(res.first_byte_s, res.attempt_start_s);
  EXPECT_GE(res.end_s, res.first_byte_s);
}

TEST(HttpClient, RetriesServerErrorsAnd429ThenSucceeds) {
  std::atomic<int> calls{0};
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/flaky", [&](const httplib::Request&, httplib::Response& res) {
      const int k = ++calls;
      if (k == 1) {
        res.status = 503;
        res.set_content("busy", "text/plain");
      } else if (k == 2) {
        res.status = 429;
        res.set_header("Retry-After", "0");
      } else if (k == 3) {
        res.status = 500;
      } else {
        res.set_content("done", "text/plain");
      }
    });
  });
  HttpResult res = http_fetch(quick(s.url("/flaky")));
  ASSERT_TRUE(res.ok()) << res.error_message;
  EXPECT_EQ(res.attempts, 4);
  EXPECT_EQ(calls.load(), 4);
  ASSERT_EQ(res.attempt_errors.size(), 3u);
  EXPECT_NE(res.attempt_errors[0].find("HTTP 503: busy"), std::string::npos)
      << res.attempt_errors[0];
  EXPECT_NE(res.attempt_errors[1].find("HTTP 429"), std::string::npos);
  EXPECT_NE(res.attempt_errors[2].find("attempt 3/4"), std::string::npos);
  EXPECT_EQ(res.body, "done");
}

TEST(HttpClient, FailsFastOnOther4xx) {
  std::atomic<int> calls{0};
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/bad", [&](const httplib::Request&, httplib::Response& res) {
      ++calls;
      res.status = 400;
      res.set_content("{\"error\":{\"message\":\"field 'text' must be a string\"}}",
                      "application/json");
    });
  });
  HttpResult res = http_fetch(quick(s.url("/bad")));
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.error, HttpErrorKind::kHttp4xx);
  EXPECT_EQ(res.attempts, 1);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_NE(res.error_message.find("HTTP 400"), std::string::npos) << res.error_message;
  EXPECT_NE(res.error_message.find("must be a string"), std::string::npos) << res.error_message;
  EXPECT_NE(res.error_message.find(s.url("/bad")), std::string::npos) << res.error_message;
}

TEST(HttpClient, GivesUpAfterMaxAttemptsWithBackoff) {
  std::atomic<int> calls{0};
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/down", [&](const httplib::Request&, httplib::Response& res) {
      ++calls;
      res.status = 502;
    });
  });
  HttpRequest r = quick(s.url("/down"));
  r.max_attempts = 4;
  r.backoff_s = 0.1;
  r.backoff_max_s = 1;
  const double t0 = monotonic_seconds();
  HttpResult res = http_fetch(r);
  const double took = monotonic_seconds() - t0;
  EXPECT_EQ(res.error, HttpErrorKind::kHttp5xx);
  EXPECT_EQ(res.attempts, 4);
  EXPECT_EQ(calls.load(), 4);
  EXPECT_GE(took, 0.9 * (0.1 + 0.2 + 0.4)) << "backoff 0.1, 0.2, 0.4 (+-10% jitter)";
  EXPECT_LT(took, 3.0);
  EXPECT_NE(res.error_message.find("attempt 4/4"), std::string::npos) << res.error_message;
}

TEST(HttpClient, ConnectionRefusedIsAConnectError) {
  HttpRequest r = quick("http://127.0.0.1:" + std::to_string(e2e_test::free_port()) + "/x");
  r.max_attempts = 3;
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kConnect) << res.error_message;
  EXPECT_EQ(res.attempts, 3);
}

TEST(HttpClient, BadUrlIsNotRetried) {
  HttpRequest r = quick("htp:/nowhere");
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kRequest) << res.error_message;
  EXPECT_EQ(res.attempts, 1);
}

TEST(HttpClient, TimeoutIsRetriedThenReported) {
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/slow", [&](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      res.set_content("late", "text/plain");
    });
  });
  HttpRequest r = quick(s.url("/slow"));
  r.timeout_s = 0.15;
  r.max_attempts = 2;
  const double t0 = monotonic_seconds();
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kTimeout) << res.error_message;
  EXPECT_EQ(res.attempts, 2);
  EXPECT_LT(monotonic_seconds() - t0, 0.9) << "the client waited for the server (1 s a request)";
}

// Writes a crafted event stream in pieces that split lines and events.
void serve_stream(httplib::Server& svr, std::vector<std::string> pieces, int status = 200) {
  svr.Post("/sse", [pieces, status](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    auto at = std::make_shared<size_t>(0);
    res.set_chunked_content_provider("text/event-stream",
                                     [pieces, at](size_t, httplib::DataSink& sink) {
                                       if (*at == pieces.size()) {
                                         sink.done();
                                         return true;
                                       }
                                       const std::string& p = pieces[(*at)++];
                                       std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                       return sink.write(p.data(), p.size());
                                     });
  });
}

TEST(HttpClient, SseEventsAcrossSplitChunks) {
  LocalServer s([&](httplib::Server& svr) {
    serve_stream(svr, {"data: {\"a\"", ":1}\n", "\n", "data: x\r\n\r\n", ": keep-alive comment\n\n",
                       "event: message\nid: 7\ndata: line1\ndata:line2\n\n", "data: [DONE]\n\n"});
  });
  std::vector<SseEvent> events;
  HttpRequest r = quick(s.url("/sse"));
  r.sse = true;
  r.on_event = [&](const SseEvent& ev) {
    events.push_back(ev);
    return std::string();
  };
  HttpResult res = http_fetch(r);
  ASSERT_TRUE(res.ok()) << res.error_message;
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[1].data, "x");
  EXPECT_EQ(events[2].data, "line1\nline2");
  EXPECT_EQ(events[3].data, "[DONE]");
  EXPECT_TRUE(res.saw_done);
  EXPECT_EQ(res.events, 4u);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GE(events[i].t, events[i - 1].t);
  EXPECT_GE(events[0].t, res.attempt_start_s);
  EXPECT_TRUE(res.body.empty()) << "a 2xx stream is not kept as a body";
}

TEST(HttpClient, SseWithoutDoneIsRetriedUnlessAllowed) {
  LocalServer s([&](httplib::Server& svr) { serve_stream(svr, {"data: 1\n\n", "data: 2\n\n"}); });
  std::vector<int> attempts;
  HttpRequest r = quick(s.url("/sse"));
  r.sse = true;
  r.max_attempts = 2;
  r.on_event = [&](const SseEvent& ev) {
    attempts.push_back(ev.attempt);
    return std::string();
  };
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kTransport);
  EXPECT_NE(res.error_message.find("before data: [DONE]"), std::string::npos) << res.error_message;
  EXPECT_EQ(attempts, (std::vector<int>{1, 1, 2, 2}));
  r.require_done = false;
  res = http_fetch(r);
  EXPECT_TRUE(res.ok()) << res.error_message;
}

TEST(HttpClient, SseLastEventWithoutBlankLineIsDelivered) {
  LocalServer s([&](httplib::Server& svr) { serve_stream(svr, {"data: a\n\ndata: [DONE]"}); });
  std::vector<std::string> got;
  HttpRequest r = quick(s.url("/sse"));
  r.sse = true;
  r.on_event = [&](const SseEvent& ev) {
    got.push_back(ev.data);
    return std::string();
  };
  HttpResult res = http_fetch(r);
  ASSERT_TRUE(res.ok()) << res.error_message;
  EXPECT_EQ(got, (std::vector<std::string>{"a", "[DONE]"}));
}

TEST(HttpClient, SseRejectedEventFailsTheAttempt) {
  LocalServer s([&](httplib::Server& svr) {
    serve_stream(svr, {"data: ok\n\n", "data: {\"error\":{\"message\":\"aborted\"}}\n\n",
                       "data: never\n\n", "data: [DONE]\n\n"});
  });
  std::vector<std::string> seen;
  HttpRequest r = quick(s.url("/sse"));
  r.sse = true;
  r.max_attempts = 2;
  r.on_event = [&](const SseEvent& ev) {
    seen.push_back(ev.data);
    return ev.data.find("error") != std::string::npos ? std::string("error chunk") : "";
  };
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kInvalid);
  EXPECT_EQ(res.attempts, 2);
  EXPECT_NE(res.error_message.find("error chunk"), std::string::npos) << res.error_message;
  for (const auto& d : seen) EXPECT_NE(d, "never") << "events after a rejection were delivered";
}

TEST(HttpClient, SseErrorStatusReadsPlainBody) {
  LocalServer s([&](httplib::Server& svr) { serve_stream(svr, {"overloaded"}, 503); });
  HttpRequest r = quick(s.url("/sse"));
  r.sse = true;
  r.max_attempts = 1;
  int events = 0;
  r.on_event = [&](const SseEvent&) {
    ++events;
    return std::string();
  };
  HttpResult res = http_fetch(r);
  EXPECT_EQ(res.error, HttpErrorKind::kHttp5xx);
  EXPECT_EQ(res.body, "overloaded");
  EXPECT_EQ(events, 0);
}

TEST(HttpClient, ValidatorRejectionIsRetried) {
  std::atomic<int> calls{0};
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/v", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(++calls == 1 ? "{broken" : "{\"ok\":1}", "application/json");
    });
  });
  HttpRequest r = quick(s.url("/v"));
  r.validate = [](const HttpResult& res) {
    return res.body.back() == '}' ? std::string() : "not JSON: " + res.body;
  };
  HttpResult res = http_fetch(r);
  ASSERT_TRUE(res.ok()) << res.error_message;
  EXPECT_EQ(res.attempts, 2);
  ASSERT_EQ(res.attempt_errors.size(), 1u);
  EXPECT_NE(res.attempt_errors[0].find("not JSON: {broken"), std::string::npos);
}

TEST(HttpClient, BoundedConcurrencyAndKeepAlive) {
  test_server::TestServerConfig cfg;
  cfg.items = test_server::synth_gsm8k(4, 1);
  cfg.token_sleep_ms = 2;
  cfg.threads = 64;
  test_server::TestServer server(cfg);
  server.start();
  HttpClient client(HttpClientOptions{.max_in_flight = 16});
  size_t done = 0, max_running = 0;
  for (int i = 0; i < 96; ++i) {
    HttpRequest r;
    r.url = server.url() + "/generate";
    r.body = R"({"text":"Question: unknown\nAnswer:","sampling_params":{"max_new_tokens":8}})";
    r.on_done = [&](HttpResult& res) {
      EXPECT_TRUE(res.ok()) << res.error_message;
      ++done;
    };
    client.submit(std::move(r));
  }
  EXPECT_EQ(client.pending(), 96u);
  client.run([&] { max_running = std::max(max_running, client.running()); }, 0.005);
  EXPECT_EQ(done, 96u);
  EXPECT_TRUE(client.idle());
  EXPECT_LE(max_running, 16u);
  const auto st = server.stats();
  EXPECT_EQ(st.generate_answered, 96u);
  EXPECT_LE(st.max_concurrent, 16u);
  EXPECT_GE(st.max_concurrent, 8u) << "requests were not concurrent";
  const auto c = client.counters();
  EXPECT_EQ(c.submitted, 96u);
  EXPECT_EQ(c.succeeded, 96u);
  EXPECT_EQ(c.retries, 0u);
}

TEST(HttpClient, ReusesConnections) {
  std::mutex mu;
  std::set<int> ports;
  LocalServer s([&](httplib::Server& svr) {
    svr.Post("/p", [&](const httplib::Request& q, httplib::Response& res) {
      std::lock_guard<std::mutex> lk(mu);
      ports.insert(q.remote_port);
      res.set_content("{}", "application/json");
    });
  });
  HttpClient client(HttpClientOptions{.max_in_flight = 2});
  for (int i = 0; i < 40; ++i) client.submit(quick(s.url("/p")));
  client.run();
  EXPECT_EQ(client.counters().succeeded, 40u);
  EXPECT_LE(ports.size(), 2u) << "keep-alive connections were not reused";
}

TEST(HttpClient, CancelAllFromACallback) {
  test_server::TestServerConfig cfg;
  cfg.token_sleep_ms = 20;
  cfg.threads = 16;
  test_server::TestServer server(cfg);
  server.start();
  HttpClient client(HttpClientOptions{.max_in_flight = 4});
  int ok = 0, cancelled = 0, calls = 0;
  for (int i = 0; i < 20; ++i) {
    HttpRequest r;
    r.url = server.url() + "/generate";
    r.body = R"({"text":"hi","sampling_params":{"max_new_tokens":4}})";
    r.on_done = [&](HttpResult& res) {
      ++calls;
      if (res.ok()) {
        ++ok;
        client.cancel_all();
      } else {
        EXPECT_EQ(res.error, HttpErrorKind::kCancelled) << res.error_message;
        ++cancelled;
      }
    };
    client.submit(std::move(r));
  }
  client.run();
  EXPECT_EQ(calls, 20) << "on_done must run exactly once per request";
  EXPECT_GE(ok, 1);
  EXPECT_EQ(ok + cancelled, 20);
  EXPECT_GE(cancelled, 15);
  EXPECT_TRUE(client.idle());
}

}  // namespace
}  // namespace dsv4::eval
