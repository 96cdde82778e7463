/*
json.h: a small JSON reader (RFC 8259) for the files the tools read whole, such as Hugging
Face's tokenizer.json: the text is parsed once into a tree of JsonNode, strings decoded in place
in the caller's buffer (an escape is never shorter than the UTF-8 it stands for), so the tree
points into that buffer and lives as long as it does.

Errors are fatal() (utils.h) and name the file, the byte offset and line, and what was expected:
a truncated file says so. Strings must be valid UTF-8 and \u escapes valid UTF-16 (a lone
surrogate is an error, not a replacement character), so every string in the tree is UTF-8.

Everything is static, as in the other headers; it also compiles as C++.
*/
#ifndef JSON_H
#define JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include "utils.h"

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonNode {
    JsonType type;
    size_t off;               // where it starts in the file (for messages)
    const char *str;          // JSON_STRING: the decoded bytes (NUL-terminated in place), str_len of them
    size_t str_len;
    double num;               // JSON_NUMBER
    int is_int;               // JSON_NUMBER written without fraction or exponent, and it fits int64
    long long inum;
    size_t n;                 // JSON_ARRAY / JSON_OBJECT: the number of elements or members
    struct JsonNode *kids;    // their values, in file order
    const char **keys;        // JSON_OBJECT: member names (decoded, NUL-terminated)
    size_t *key_lens;
} JsonNode;

typedef struct {
    const char *path;
    char *s;                  // the text (modified: strings are decoded in place)
    size_t n, i;
    int depth;
} JsonParser;

#define JSON_MAX_DEPTH 128

static void json_fail(JsonParser *p, size_t at, const char *what) __attribute__((noreturn, unused));
static void json_fail(JsonParser *p, size_t at, const char *what) {
    size_t line = 1;
    for (size_t k = 0; k < at && k < p->n; k++) { line += p->s[k] == '\n'; }
    if (at >= p->n) { fatal("%s: invalid JSON: the file ends at byte %zu (line %zu) where %s (truncated?)", p->path, p->n, line, what); }
    fatal("%s: invalid JSON at byte %zu (line %zu): %s", p->path, at, line, what);
}

static void json_ws(JsonParser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) { p->i++; }
}

static uint32_t json_hex4(JsonParser *p) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        if (p->i >= p->n) { json_fail(p, p->i, "a \\u escape needs 4 hex digits"); }
        unsigned c = (unsigned char)p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') { v |= c - '0'; }
        else if (c >= 'a' && c <= 'f') { v |= c - 'a' + 10; }
        else if (c >= 'A' && c <= 'F') { v |= c - 'A' + 10; }
        else { json_fail(p, p->i - 1, "bad hex digit in a \\u escape"); }
    }
    return v;
}

static size_t json_put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), 0 if malformed
static int json_utf8_len(const unsigned char *s, size_t n, size_t i) {
    unsigned c = s[i];
    if (c < 0x80) { return 1; }
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { need = 2; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; if (c == 0xE0) { lo = 0xA0; } if (c == 0xED) { hi = 0x9F; } }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; if (c == 0xF0) { lo = 0x90; } if (c == 0xF4) { hi = 0x8F; } }
    else { return 0; }
    if (n - i < (size_t)need || s[i + 1] < lo || s[i + 1] > hi) { return 0; }
    for (int k = 2; k < need; k++) { if ((s[i + k] & 0xC0) != 0x80) { return 0; } }
    return need;
}

// p->i at the opening quote; decodes in place and returns the start (NUL-terminated), *len bytes
static const char *json_string(JsonParser *p, size_t *len) {
    if (p->i >= p->n || p->s[p->i] != '"') { json_fail(p, p->i, "expected a string"); }
    p->i++;
    char *out = p->s + p->i, *o = out;
    for (;;) {
        if (p->i >= p->n) { json_fail(p, p->n, "a string is still open"); }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; break; }
        if (c < 0x20) { json_fail(p, p->i, "control character in a string (must be escaped)"); }
        if (c != '\\') {
            int l = json_utf8_len((const unsigned char *)p->s, p->n, p->i);
            if (l == 0) { json_fail(p, p->i, "invalid UTF-8 in a string"); }
            memmove(o, p->s + p->i, (size_t)l);
            o += l;
            p->i += (size_t)l;
            continue;
        }
        if (p->i + 1 >= p->n) { json_fail(p, p->n, "an escape is still open"); }
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                size_t at = p->i - 2;
                uint32_t cp = json_hex4(p);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') { json_fail(p, at, "a high surrogate \\u escape without a low one after it"); }
                    p->i += 2;
                    uint32_t lo = json_hex4(p);
                    if (lo < 0xDC00 || lo > 0xDFFF) { json_fail(p, at, "a high surrogate \\u escape followed by no low surrogate"); }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    json_fail(p, at, "a lone low surrogate \\u escape");
                }
                o += json_put_utf8(o, cp);
                break;
            }
            default: json_fail(p, p->i - 2, "unknown escape (expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
        }
    }
    *len = (size_t)(o - out);
    *o = 0;  // o < the closing quote's old place, already consumed
    return out;
}

static void json_value(JsonParser *p, JsonNode *v);

static int json_lit(JsonParser *p, const char *word) {
    size_t l = strlen(word);
    if (p->n - p->i >= l && memcmp(p->s + p->i, word, l) == 0) { p->i += l; return 1; }
    return 0;
}

static void json_number(JsonParser *p, JsonNode *v) {
    size_t a = p->i;
    int integral = 1;
    if (p->i < p->n && p->s[p->i] == '-') { p->i++; }
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') { json_fail(p, a, "expected a value"); }
    if (p->s[p->i] == '0') { p->i++; } else { while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; } }
    if (p->i < p->n && p->s[p->i] == '.') {
        integral = 0;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') { json_fail(p, p->i, "expected a digit after '.'"); }
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; }
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        integral = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) { p->i++; }
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') { json_fail(p, p->i, "expected a digit in the exponent"); }
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') { p->i++; }
    }
    char buf[64];
    size_t l = p->i - a;
    if (l >= sizeof(buf)) { json_fail(p, a, "number too long"); }
    memcpy(buf, p->s + a, l);
    buf[l] = 0;
    v->type = JSON_NUMBER;
    v->num = strtod(buf, NULL);
    v->is_int = integral && l <= 18;  // up to 18 digits always fit an int64
    v->inum = v->is_int ? strtoll(buf, NULL, 10) : 0;
}

// an array or object: members collected on a local stack, then copied to exact-size arrays
static void json_container(JsonParser *p, JsonNode *v, int object) {
    char close = object ? '}' : ']';
    if (++p->depth > JSON_MAX_DEPTH) { json_fail(p, p->i, "nested deeper than 128 levels"); }
    p->i++;
    size_t cap = 8, n = 0;
    JsonNode *kids = (JsonNode *)mallocCheck(cap * sizeof(JsonNode));
    const char **keys = object ? (const char **)mallocCheck(cap * sizeof(char *)) : NULL;
    size_t *key_lens = object ? (size_t *)mallocCheck(cap * sizeof(size_t)) : NULL;
    json_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
    } else {
        for (;;) {
            if (n == cap) {
                cap *= 2;
                kids = (JsonNode *)reallocCheck(kids, cap * sizeof(JsonNode));
                if (object) {
                    keys = (const char **)reallocCheck((void *)keys, cap * sizeof(char *));
                    key_lens = (size_t *)reallocCheck(key_lens, cap * sizeof(size_t));
                }
            }
            json_ws(p);
            if (object) {
                if (p->i >= p->n || p->s[p->i] != '"') { json_fail(p, p->i, "expected a member name (a string)"); }
                keys[n] = json_string(p, &key_lens[n]);
                json_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') { json_fail(p, p->i, "expected ':' after a member name"); }
                p->i++;
                json_ws(p);
            }
            json_value(p, &kids[n]);
            n++;
            json_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
            json_fail(p, p->i, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    v->n = n;
    v->kids = n ? (JsonNode *)reallocCheck(kids, n * sizeof(JsonNode)) : (free(kids), (JsonNode *)NULL);
    v->keys = keys;
    v->key_lens = key_lens;
    p->depth--;
}

static void json_value(JsonParser *p, JsonNode *v) {
    memset(v, 0, sizeof(*v));
    json_ws(p);
    v->off = p->i;
    if (p->i >= p->n) { json_fail(p, p->n, "a value was expected"); }
    char c = p->s[p->i];
    if (c == '{' || c == '[') { json_container(p, v, c == '{'); }
    else if (c == '"') { v->type = JSON_STRING; v->str = json_string(p, &v->str_len); }
    else if (json_lit(p, "null")) { v->type = JSON_NULL; }
    else if (json_lit(p, "true")) { v->type = JSON_TRUE; }
    else if (json_lit(p, "false")) { v->type = JSON_FALSE; }
    else { json_number(p, v); }
}

// Parses text[0..n) (which it modifies; keep it alive while the tree is used) into *root.
static void __attribute__((unused)) json_parse(JsonNode *root, const char *path, char *text, size_t n) {
    JsonParser p = {path, text, n, 0, 0};
    json_value(&p, root);
    json_ws(&p);
    if (p.i != p.n) { json_fail(&p, p.i, "unexpected data after the top-level value"); }
}

static void __attribute__((unused)) json_free(JsonNode *v) {
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t k = 0; k < v->n; k++) { json_free(&v->kids[k]); }
        free(v->kids);
        free((void *)v->keys);
        free(v->key_lens);
    }
    memset(v, 0, sizeof(*v));
}

// the member `key` of an object (the last one, if repeated), or NULL (also when v is no object)
static JsonNode __attribute__((unused)) *json_get(const JsonNode *v, const char *key) {
    if (v == NULL || v->type != JSON_OBJECT) { return NULL; }
    size_t l = strlen(key);
    for (size_t k = v->n; k-- > 0;) {
        if (v->key_lens[k] == l && memcmp(v->keys[k], key, l) == 0) { return &v->kids[k]; }
    }
    return NULL;
}

static const char __attribute__((unused)) *json_type_name(JsonType t) {
    static const char *names[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
    return names[t];
}

#endif // JSON_H
