import { describe, expect, it } from 'vitest';
import { InvalidJsonError, ValidationError } from '../../src/errors.js';
import { jsonDepthIssue, parseJsonBody, pathTooDeep } from '../../src/lib/json-depth.js';

/** `levels` arrays nested in one another, around `inner`. */
const arrays = (levels: number, inner = '') => `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;

describe('pathTooDeep', () => {
  it('counts the root as level 1 and objects and arrays alike; scalars add nothing', () => {
    expect(pathTooDeep(JSON.parse(arrays(64, '1')))).toBeNull();
    expect(pathTooDeep(JSON.parse(arrays(65)))).toEqual(Array(64).fill(0));
    expect(pathTooDeep({ a: { b: [{}] } }, 4)).toBeNull();
    expect(pathTooDeep({ a: { b: [{}] } }, 3)).toEqual(['a', 'b', 0]);
    for (const scalar of [null, 1, 'text', true, undefined]) expect(pathTooDeep(scalar, 0)).toBeNull();
  });

  it('finds the deep branch among shallow siblings, in objects and arrays', () => {
    const deep = JSON.parse(`{"x":[1,{"y":2}],"list":[{}, ${arrays(70)}],"z":{}}`);
    expect(pathTooDeep(deep)).toEqual(['list', 1, ...Array(62).fill(0)]);
  });

  it('measures 100,000 levels without running out of stack', () => {
    const value = JSON.parse(arrays(100_000));
    expect(pathTooDeep(value)).toHaveLength(64);
    expect(jsonDepthIssue(value, 'payload')).toEqual({ path: ['payload', ...Array(64).fill(0)].join('.'), message: 'nests deeper than 64 levels' });
  });
});

describe('parseJsonBody', () => {
  it('reads an empty body as {}, refuses malformed JSON and too-deep JSON, and returns the rest', () => {
    expect(parseJsonBody('  ')).toEqual({});
    expect(parseJsonBody('[1]')).toEqual([1]);
    expect(() => parseJsonBody('\0')).toThrow(InvalidJsonError);
    const error = (() => {
      try {
        parseJsonBody(`{"a":${arrays(64)}}`);
      } catch (err) {
        return err;
      }
    })() as ValidationError;
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.errors).toEqual([{ path: ['a', ...Array(63).fill(0)].join('.'), message: 'nests deeper than 64 levels' }]);
  });
});
